"""The sections of a profile result (kbench.report.models): each a frozen model present when the mode measured what
it shows. The timeline, intra and proton modes' own are kbench.report.mode_sections's (``MODE_SECTIONS``)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict

from kbench.analysis.compare import BaselineRow
from kbench.analysis.counters import StageCounters
from kbench.analysis.ptx import InstructionMix
from kbench.model import Model


class Frozen(Model):
    model_config = ConfigDict(frozen=True)


class Baseline(Frozen):
    """``## vs Baseline``: this run against an earlier one of the same kernel and parameters."""

    rows: list[BaselineRow]
    source: str  # which run, as the report names it
    code: str = ""  # what changed in the source that ran between the two runs (kbench.report.source.change)
    code_changed: bool | None = None  # None: one of the runs recorded no source


class Timing(Frozen):
    """``## Timing``: the repetitions behind each stage's median (event mode)."""

    concurrency: str | None = None  # a plan on several streams: what the timing can and cannot say about it


class Counters(Frozen):
    """``## Counters``: per-stage ncu figures (annotation and ncu modes)."""

    source: str  # the .ncu-rep the figures come from
    stages: list[StageCounters]


class Conformance(Frozen):
    """``## Conformance``: declared against observed kernels and grids (a live counter run of a plan)."""

    rows: list[dict[str, str]]


class Tiling(Frozen):
    """``## Tiling``: each stage's chosen configuration and compiled kernel facts (a live run)."""

    stages: dict[str, dict[str, Any]]

    def instructions(self) -> list[tuple[str, str]]:
        """Each stage with a compiled kernel's instruction mix (kbench.analysis.ptx), as one line."""
        return [
            (name, InstructionMix.model_validate(t["instructions"]).line())
            for name, t in self.stages.items()
            if t.get("instructions")
        ]


# the sections whose models are kbench.report.mode_sections's (ModeSections, a Sections with them)
MODE_SECTIONS = ("timeline", "intra", "pc_sampling")


class Sections(Frozen):
    baseline: Baseline | None = None
    timing: Timing | None = None
    counters: Counters | None = None
    conformance: Conformance | None = None
    tiling: Tiling | None = None

    # report.md's order of the sections that follow the core's Roofline (vs Baseline follows Top 3)
    AFTER_ROOFLINE: ClassVar[tuple[str, ...]] = (
        "timing",
        "timeline",
        "intra",
        "pc_sampling",
        "counters",
        "conformance",
        "tiling",
    )

    def present(self, names: tuple[str, ...]) -> list[str]:
        return [n for n in names if getattr(self, n, None) is not None]
