"""The profile result: a core every report has, plus typed optional sections. Built once by the pipeline and
frozen; it is what templates see and what result.json holds.

A section is present when the mode measured what it shows; report.md includes a section's template partial
(``templates/sections/<name>.md.j2``) exactly when the section is present.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from kbench.analysis.clocks import ClockSummary
from kbench.analysis.compare import BaselineRow
from kbench.analysis.counters import StageCounters
from kbench.analysis.figures import PlanFigures
from kbench.analysis.intra import IntraAnalysis
from kbench.analysis.proton import LineSamples
from kbench.analysis.roofline import achieved_gbps, achieved_tflops
from kbench.analysis.stages import StageFigures
from kbench.analysis.timeline_stages import TimelineAnalysis
from kbench.analysis.timing_stats import TimingStats
from kbench.model import Model
from kbench.report.folder import RESULT


class Frozen(Model):
    model_config = ConfigDict(frozen=True)


class Baseline(Frozen):
    """``## vs Baseline``: this run against an earlier one of the same kernel and parameters."""

    rows: list[BaselineRow]
    source: str  # which run, as the report names it


class Timing(Frozen):
    """``## Timing``: the repetitions behind each stage's median (event mode)."""

    concurrency: str | None = None  # a plan on several streams: what the timing can and cannot say about it


class Timeline(Frozen):
    """``## Timeline``: the timeline analyses (nsys mode)."""

    analysis: TimelineAnalysis
    capture: str  # which backend captured the timeline, into which files, and why that one


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


class IntraStage(Frozen):
    """One stage of ``## Inside the kernel``: its plain and recording times, and its recorded launch's figures."""

    name: str
    tasks: list[str]
    plain_us: float  # median over the repetitions, CUDA events
    recording_us: float | None = None  # the same with the tasks recorded (None: the stage records none)
    trace: str | None = None  # the Chrome trace of one recorded launch, in the run folder
    analysis: IntraAnalysis | None = None
    timer_step_ns: int | None = None  # every timestamp a multiple of it (the timer's step, at most)
    dropped_records: int = 0  # records the final trace lost (0: none; an overflow is re-recorded with room)
    overflows: list[dict[str, int]] = Field(default_factory=list)  # buffers that were too small, before the last
    unpaired_records: int = 0
    same_output: bool | None = None  # the recording launch wrote the same output as the plain one

    @property
    def overhead_pct(self) -> float | None:
        if self.recording_us is None or self.plain_us <= 0:
            return None
        return 100.0 * (self.recording_us / self.plain_us - 1.0)


class Intra(Frozen):
    """``## Inside the kernel``: the intra-kernel task timeline (intra mode)."""

    reps: int
    stages: list[IntraStage]


class SampledStage(Frozen):
    """One stage's PC samples (Proton's pcsampling): totals, stall reasons, and its most sampled lines."""

    stage: str
    samples: int
    stalled: int
    reasons: dict[str, int]  # stall reason -> stalled samples, most first
    lines: list[LineSamples]  # the most sampled source lines, most first


class PcSampling(Frozen):
    """``## PC sampling``: where each stage's warps were when sampled, and why they stalled (proton mode)."""

    stages: list[SampledStage]


class Sections(Frozen):
    baseline: Baseline | None = None
    timing: Timing | None = None
    timeline: Timeline | None = None
    intra: Intra | None = None
    pc_sampling: PcSampling | None = None
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
        return [n for n in names if getattr(self, n) is not None]


class ProfileResult(Frozen):
    # identity
    kernel: str
    version: str
    mode: str
    params: dict[str, Any]
    device: str
    device_key: str | None
    # the figures and how they were measured
    figures: PlanFigures
    plan_timing: TimingStats | None = None  # the whole plan measured as one (event: end to end; nsys: its span)
    timing_method: str = ""
    chart: str | None = None  # file name of the roofline chart in the run folder
    # the run
    check: str | None = None
    clocks: str = ""  # how the clocks were held and what they did while measuring (one line)
    clock_summary: ClockSummary | None = None  # the sampled SM clock and clock-event reasons behind that line
    tools: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    offline: bool = False  # `kbench analyze` of an existing capture: nothing was run or checked here
    # what to open next in the run folder: relative path, what it holds
    files: list[tuple[str, str]] = Field(default_factory=list)
    out_dir: str = ""
    sections: Sections = Sections()

    @property
    def stages(self) -> list[StageFigures]:
        return self.figures.stages

    @property
    def path(self) -> Path:
        return Path(self.out_dir)

    @property
    def report_md(self) -> str:
        """The run's report.md as written."""
        return (self.path / "report.md").read_text()

    def stage(self, name: str) -> StageFigures:
        return next(s for s in self.figures.stages if s.name == name)


@dataclass(frozen=True)
class Totals:
    """The whole plan's figures: its duration (the measured whole-plan median where the mode timed it as one, else
    the stages' sum) and the rates its stages' FLOP/byte models give over it (None where a stage has no model)."""

    duration_us: float
    tflops: float | None
    gbps: float | None


def totals(r: ProfileResult) -> Totals:
    us = r.plan_timing.median_us if r.plan_timing else r.figures.total_us
    flops = [s.flops for s in r.figures.stages]
    nbytes = [s.dram_bytes for s in r.figures.stages]
    return Totals(
        duration_us=us,
        tflops=achieved_tflops(sum(f for f in flops if f is not None), us) if us and None not in flops else None,
        gbps=achieved_gbps(sum(b for b in nbytes if b is not None), us) if us and None not in nbytes else None,
    )


def read_result(run_dir: Path) -> ProfileResult | None:
    """The result.json of a finished run, or None when it is missing or unreadable."""
    try:
        return ProfileResult.model_validate_json((run_dir / RESULT).read_text())
    except (OSError, ValueError):
        return None
