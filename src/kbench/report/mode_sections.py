"""The report sections only the timeline (nsys), intra and proton modes write, apart from the rest of the profile
result (kbench.report.sections): their field types are those modes' own analyses, so a counters run or a
`kbench analyze` of an .ncu-rep neither imports those analyses nor builds their validators (issue 12: ~35 ms of a
0.39 s analysis on the H100 machine). A result holding one of them is a ``ModeSections``; a result.json read back
gets that class again (ProfileResult picks it by the sections present)."""

from __future__ import annotations

from pydantic import Field

from kbench.analysis.intra import IntraAnalysis
from kbench.analysis.proton import LineSamples
from kbench.analysis.timeline_stages import TimelineAnalysis
from kbench.report.sections import Frozen, Sections


class TimelinePicture(Frozen):
    """The timeline picture in the run folder and the stretch of the capture it draws, in words."""

    file: str
    what: str


class Timeline(Frozen):
    """``## Timeline``: the timeline analyses (nsys mode)."""

    analysis: TimelineAnalysis
    capture: str  # which backend captured the timeline, into which files, and why that one
    picture: TimelinePicture | None = None


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


class ModeSections(Sections):
    """Sections with the timeline, intra or proton mode's own."""

    timeline: Timeline | None = None
    intra: Intra | None = None
    pc_sampling: PcSampling | None = None
