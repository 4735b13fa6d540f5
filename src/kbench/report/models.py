"""The profile result: the only object templates see, and what result.json holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kbench.analysis.clocks import ClockSummary
from kbench.analysis.compare import BaselineRow
from kbench.analysis.counters import StageCounters
from kbench.analysis.summary import PlanFigures, StageFigures
from kbench.analysis.timeline_stages import TimelineAnalysis
from kbench.analysis.timing_stats import TimingStats


class ProfileResult(BaseModel):
    kernel: str
    version: str
    mode: str
    params: dict[str, Any]
    device: str
    device_key: str | None
    figures: PlanFigures
    plan_timing: TimingStats | None = None
    timing_method: str = ""
    check: str | None = None
    clocks: str = ""  # how the clocks were held and what they did while measuring (one line)
    clock_summary: ClockSummary | None = None  # the sampled SM clock and clock-event reasons behind that line
    tools: dict[str, Any] = {}
    tiling: dict[str, dict[str, Any]] = {}
    baseline: list[BaselineRow] = []
    baseline_from: str | None = None
    notes: list[str] = []
    counters: list[StageCounters] = []  # counter modes: per-stage ncu figures
    source: str = ""  # counter modes: the .ncu-rep the figures come from
    conformance: list[dict[str, str]] = []  # counter modes with a plan: declared vs observed kernels
    chart: str | None = None  # file name of the roofline chart in the run folder
    timeline: TimelineAnalysis | None = None  # nsys mode: the timeline analyses
    capture: str = ""  # nsys mode: which backend captured the timeline, into which files, and why that one
    concurrency: str | None = None  # a plan on several streams: what this mode can and cannot say about it
    offline: bool = False  # `kbench analyze` of an existing capture: nothing was run or checked here
    out_dir: str = ""
    report_md: str = ""

    @property
    def stages(self) -> list[StageFigures]:
        return self.figures.stages

    @property
    def path(self) -> Path:
        return Path(self.out_dir)

    def stage(self, name: str) -> StageFigures:
        return next(s for s in self.figures.stages if s.name == name)
