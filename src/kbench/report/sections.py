"""The sections of a profile result (kbench.report.models): each a frozen model present when the mode measured what
it shows. The timeline, intra and proton modes' own are kbench.report.mode_sections's (``MODE_SECTIONS``)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from kbench.analysis.access_facts import Predicted, SiteFacts
from kbench.analysis.compare import BaselineRow
from kbench.analysis.counters import StageCounters
from kbench.analysis.ptx import InstructionMix
from kbench.analysis.sampling import SampledStage
from kbench.analysis.ttgir import idle_warps, partition_warps
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
    # each stage's counters from PM sampling (kbench.analysis.sampling); report.json's sections.sampling
    sampled: list[SampledStage] | None = Field(default=None, exclude=True)
    # what sampled them: the chip, its single-pass sets, the metric of each figure, the interval, the binding's version
    sampler: dict[str, Any] | None = Field(default=None, exclude=True)


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

    def rows(self) -> list[tuple[str, dict[str, Any]]]:
        """One row per stage, or per Triton kernel of a stage that launched several (``compiled_kernels``): each
        with that kernel's own facts and launch grid, labelled "stage (kernel)", so no fact sits under another
        kernel."""
        out: list[tuple[str, dict[str, Any]]] = []
        for name, t in self.stages.items():
            kernels = t.get("compiled_kernels") or {}
            if len(kernels) > 1:
                # the plan's launch parameters without num_warps / num_stages: each kernel's own are in its row
                config = {k: v for k, v in (t.get("config") or {}).items() if k not in ("num_warps", "num_stages")}
                out += [
                    (f"{name} ({k})", {**t, **facts, "kernel": k, "config": config}) for k, facts in kernels.items()
                ]
            else:  # one kernel: the grid Triton launched it with, where it told, not the plan's declared one
                told = next((k.get("grid") for k in kernels.values()), None)
                out.append((name, {**t, "grid": told} if told else t))
        return out

    def tuning(self) -> list[tuple[str, str]]:
        """Each tuned stage's autotune line (tiling/<stage>/autotuning.json's decision; a cached one says so) and
        its kernels' own @triton.autotune picks, labelled by the stage."""
        out = []
        for name, t in self.stages.items():
            d = t.get("tuning")
            if isinstance(d, dict) and d.get("line"):
                out.append((name, ("cached: " if t.get("tuning_source") == "cache" else "") + str(d["line"])))
            out += [
                (name, str(r["line"])) for r in t.get("triton_autotune") or [] if isinstance(r, dict) and r.get("line")
            ]
        return out

    def instructions(self) -> list[tuple[str, str]]:
        """Each compiled kernel's instruction mix (kbench.analysis.ptx), as one line labelled as its row is, with its
        warp-specialized partitions where it has them (kbench.analysis.ttgir.partitions)."""
        return [
            (name, InstructionMix.model_validate(t["instructions"]).line() + _partitions(t))
            for name, t in self.rows()
            if t.get("instructions")
        ]


def _partitions(t: dict[str, Any]) -> str:
    """A kernel record's partitions: ``; warp-specialized: default partition 4 warps, workers 4 warps (240
    registers), 1 warp (24 registers); 3 warps in no partition (the launch is whole warpgroups)``."""
    p = t.get("partitions")
    if not p:
        return ""

    def warps(n: object) -> str:
        return f"{n} warp{'' if n == 1 else 's'}"

    workers = ", ".join(
        warps(w.get("warps")) + (f" ({w['registers']} registers)" if w.get("registers") else "")
        for w in p.get("workers", [])
    )
    idle = idle_warps(partition_warps(p), t.get("num_warps"))
    spare = f"; {warps(idle)} in no partition (the launch is whole warpgroups)" if idle else ""
    return f"; warp-specialized: default partition {warps(p.get('default_warps'))}, workers {workers}{spare}"


class AccessStage(Frozen):
    """One stage of ``## Accesses``: its launches as traced under the CPU interpreter and its load/store lines."""

    name: str
    grids: list[list[int]]
    programs: list[int]  # per launch: its grid's programs
    traced_programs: list[int]  # of which the interpreter ran (a sample, weighted, where fewer)
    seconds: float  # the interpreter's wall time for the stage
    sites: list[dict[str, Any]]  # kbench.analysis.access_facts.SiteFacts records, in the order the lines ran
    pictures: list[dict[str, Any]]  # {"tensor", "shape", "file"}: which programs read and wrote each element
    model_bytes: float | None  # the plan's model at the traced point
    requested_bytes: int  # what the active lanes loaded and stored
    distinct_bytes: int | None  # of which at distinct addresses (None: a sample ran)

    SHOWN: ClassVar[int] = 8  # lines per stage in report.md (access.md has them all)

    def rows(self, check_reuse: dict[str, float]) -> list[list[str]]:
        """Its first ``SHOWN`` lines as table cells; reuse from the check-size run where a sample ran here."""
        out = []
        for r in self.sites[: self.SHOWN]:
            f = SiteFacts.of(r)
            reuse = f"{f.reuse:.2f}" if f.reuse is not None else None
            if reuse is None and f"{f.kind} {f.line}" in check_reuse:
                reuse = f"{check_reuse[f'{f.kind} {f.line}']:.2f} (check size)"
            out.append(
                [
                    f"{f.line} ({f.function})",
                    f.kind,
                    str(f.bytes),
                    f"{f.masked_pct:.1f}",
                    "n/a" if f.stride_bytes is None else str(f.stride_bytes),
                    "n/a" if f.bytes_per_sector is None else f"{f.bytes_per_sector:.1f}",
                    reuse or "n/a",
                    str(f.out_of_bounds),
                ]
            )
        return out


class Accesses(Frozen):
    """``## Accesses``: every stage's loads and stores traced under Triton's CPU interpreter (access mode)."""

    point: str  # the parameters traced, and why those
    stages: list[AccessStage]
    check: str | None = None  # the check-size run: its parameters and verdict
    # "<kind> <file:line>" -> reuse across programs at the check size
    check_reuse: dict[str, float] = Field(default_factory=dict)
    full: str = "access.md"  # every line of every stage, where the report shows the first few

    def sites(self) -> list[SiteFacts]:
        """Every load and store line of every stage."""
        return [SiteFacts.of(r) for s in self.stages for r in s.sites]

    def predicted(self) -> dict[str, Predicted]:
        """Each stage's summary for the catalogue and the baseline."""
        out = {}
        for s in self.stages:
            p = Predicted.of([SiteFacts.of(r) for r in s.sites], self.point)
            if p is not None:
                out[s.name] = p
        return out


# the sections whose models are kbench.report.mode_sections's (ModeSections, a Sections with them)
MODE_SECTIONS = ("timeline", "intra", "pc_sampling")


class Sections(Frozen):
    baseline: Baseline | None = None
    timing: Timing | None = None
    counters: Counters | None = None
    conformance: Conformance | None = None
    tiling: Tiling | None = None
    accesses: Accesses | None = None

    # report.md's order of the sections that follow the core's Roofline (vs Baseline follows Top 3)
    AFTER_ROOFLINE: ClassVar[tuple[str, ...]] = (
        "accesses",
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
