"""The profile result: a core every report has, plus typed optional sections. Built once by the pipeline and
frozen; it is what templates see and what result.json holds.

A section (kbench.report.sections) is present when the mode measured what it shows; report.md includes a section's
template partial (``templates/sections/<name>.md.j2``) exactly when the section is present. The sections of the
timeline, intra and proton modes (``MODE_SECTIONS``) are kbench.report.mode_sections's, so that the other modes and
an analysis of an .ncu-rep do not import those modes' analyses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, SerializeAsAny, ValidationInfo, field_validator

from kbench.analysis.clocks import ClockSummary
from kbench.analysis.figures import PlanFigures
from kbench.analysis.roofline import achieved_gbps, achieved_tflops
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import UsageError
from kbench.fsutil import checked_name, read_nofollow
from kbench.report import kernel_times
from kbench.report.folder import RESULT
from kbench.report.sections import MODE_SECTIONS, Frozen, Sections
from kbench.report.source import Source


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
    waterfall_chart: str | None = None  # file name of the distance picture (each stage's waterfall) in the run folder
    # the run
    check: str | None = None
    clocks: str = ""  # how the clocks were held and what they did while measuring (one line)
    clock_summary: ClockSummary | None = None  # the sampled SM clock and clock-event reasons behind that line
    tools: dict[str, Any] = Field(default_factory=dict)
    source: Source | None = None  # the source the plan ran (None: not a kernel package's module, or not recorded)
    notes: list[str] = Field(default_factory=list)
    offline: bool = False  # `kbench analyze` of an existing capture: nothing was run or checked here
    # what to open next in the run folder: relative path, what it holds
    files: list[tuple[str, str]] = Field(default_factory=list)
    out_dir: str = ""
    sections: SerializeAsAny[Sections] = Sections()  # written as the class it is (ModeSections has more fields)

    @field_validator("sections", mode="before")
    @classmethod
    def _mode_sections(cls, value: Any) -> Any:
        """Sections read back (a result.json) holding a timeline, intra or proton section are a ModeSections."""
        if isinstance(value, dict) and any(value.get(name) is not None for name in MODE_SECTIONS):
            from kbench.report.mode_sections import ModeSections

            return ModeSections.model_validate(value)
        return value

    @field_validator("kernel", "version")
    @classmethod
    def _name(cls, value: str, info: ValidationInfo) -> str:
        """A name read back from result.json passes the check a name kbench makes does (the devlog makes a file of
        the kernel's); UsageError, not pydantic's ValueError, so that the line says which name and why."""
        return checked_name(value, f"result.json names the {info.field_name}")

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

    def kernel_times(self) -> dict[str, str]:
        """Per stage whose Kernels table sums outside its Duration's range, the line saying why
        (kbench.report.kernel_times)."""
        return kernel_times.lines(self.figures.kernels, self.figures.stages, self.mode)


@dataclass(frozen=True)
class Totals:
    """The whole plan's figures: its duration (the measured whole-plan median where the mode timed it as one, else
    the stages' sum) and the rates its stages' FLOP/byte models give over it (None where a stage has no model, and
    where the duration is Triton's CPU interpreter's: no GPU ran, so no rate was achieved)."""

    duration_us: float
    tflops: float | None
    gbps: float | None


def totals(r: ProfileResult) -> Totals:
    us = r.plan_timing.median_us if r.plan_timing else r.figures.total_us
    if r.figures.timer != "gpu":
        return Totals(duration_us=us, tflops=None, gbps=None)
    flops = [s.flops for s in r.figures.stages]
    nbytes = [s.dram_bytes for s in r.figures.stages]
    return Totals(
        duration_us=us,
        tflops=achieved_tflops(sum(f for f in flops if f is not None), us) if us and None not in flops else None,
        gbps=achieved_gbps(sum(b for b in nbytes if b is not None), us) if us and None not in nbytes else None,
    )


def load_result(run_dir: Path) -> ProfileResult:
    """A finished run's result.json, read as kbench wrote it (never through a symbolic link, never over its size
    limit: kbench.fsutil.read_nofollow); a usage error naming the folder otherwise."""
    path = run_dir / RESULT
    if not path.is_file():
        raise UsageError(f"{run_dir} has no {RESULT}: name the folder of a finished run (see kbench runs)")
    try:
        return ProfileResult.model_validate_json(read_nofollow(path))
    except OSError as e:
        raise UsageError(
            f"{path} is not a file kbench wrote ({e.strerror or e}): name a finished run's folder"
        ) from None
    except ValueError as e:
        raise UsageError(f"{path} is not a kbench result ({str(e).splitlines()[0]})") from None


def read_result(run_dir: Path) -> ProfileResult | None:
    """``load_result``, or None where it refuses the folder's result.json (missing, unreadable, over its size limit,
    a link, altered)."""
    try:
        return load_result(run_dir)
    except UsageError:
        return None
