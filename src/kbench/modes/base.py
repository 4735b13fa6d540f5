"""What a profiling mode is: one backend behind the small ``Backend`` protocol, and the values the pipeline hands
it (``Job`` to capture, ``Context`` to analyse) and gets back (``Capture``, ``Analysis``)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kbench.errors import KbenchError, UsageError
from kbench.report.folder import DEFAULT_ROOT

if TYPE_CHECKING:
    from kbench.analysis.access_facts import Predicted
    from kbench.analysis.devices import ActiveDevice, DeviceTable
    from kbench.analysis.figures import PlanFigures
    from kbench.analysis.timing_stats import TimingStats
    from kbench.capture.clocks import Measuring
    from kbench.capture.phases import Stopwatch
    from kbench.capture.prepare import Prepared
    from kbench.plan.base import KernelPlan
    from kbench.report.models import ProfileResult
    from kbench.report.sections import Sections

log = logging.getLogger(__name__)


def lock_by_default() -> bool:
    """KBENCH_LOCK_CLOCKS (kbench.capture.clocks, imported when options are made: `kbench analyze` makes none)."""
    from kbench.capture import clocks

    return clocks.lock_by_default()


@dataclass
class RunOptions:
    """How to profile: the CLI's options, or the API's keyword arguments (``for_api``)."""

    out_root: Path = DEFAULT_ROOT
    bench_runs: int = 100
    check: bool = True
    cuda_graph: bool = False  # event mode: time CUDA-graph replays
    baseline: Path | None = None  # an earlier run folder to compare with; default: the previous one
    seed: int | None = None  # inputs' random seed; default: fresh each run
    timeout_s: float = 1800.0  # modes that run a profiler: the whole profiler run
    timeline_backend: str = "auto"  # nsys mode: "auto" (nsys, else the PyTorch profiler), "nsys" or "torch"
    pc_sampling: bool = False  # proton mode: the session samples PCs (stall reasons per source line)
    device: str | None = None  # access mode: the device to predict for (a conf/devices.json key); default: the GPU
    access_programs: int = 64  # access mode: programs traced per launch at most (a sample of a larger grid); 0: all
    lock_clocks: bool = field(default_factory=lock_by_default)  # lock SM (and memory) clocks when permitted
    wait: bool = True  # queue behind another kbench on the same GPU (False: stop at once)
    progress: Callable[[str], None] = log.info

    def __post_init__(self) -> None:
        """Refuse what no run can use, before any GPU work (CLI, API and MCP alike)."""
        if not math.isfinite(self.timeout_s) or self.timeout_s <= 0:
            raise UsageError(f"--timeout={self.timeout_s:g}: give the profiler run's limit in seconds, above 0")
        if self.bench_runs < 1:
            raise UsageError(f"--bench-runs={self.bench_runs}: at least 1")
        if self.access_programs < 0:
            raise UsageError(f"--access-programs={self.access_programs}: 0 (every program) or more")

    @classmethod
    def for_api(cls, out_dir: Path | str | None, bench_runs: int, **options: Any) -> RunOptions:
        """Options from the API's keyword arguments (``lock_clocks`` None: KBENCH_LOCK_CLOCKS, default on); an
        unknown one is a UsageError naming the known ones."""
        known = {f.name for f in fields(cls)} - {"out_root", "bench_runs", "progress"}
        if unknown := sorted(set(options) - known):
            raise UsageError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        if options.get("lock_clocks") is None:
            options.pop("lock_clocks", None)
        if out_dir is not None and not str(out_dir).strip():  # Path("") would be the current directory
            raise UsageError("out_dir is empty; name the output folder (default out/profiles)")
        if options.get("baseline") is not None:
            options["baseline"] = Path(options["baseline"])
        return cls(out_root=Path(out_dir) if out_dir is not None else DEFAULT_ROOT, bench_runs=bench_runs, **options)


# Options that only some modes take, with their defaults: a mode lists the ones it takes in ``Backend.options``.
MODE_OPTIONS: dict[str, Any] = {
    "cuda_graph": False,
    "timeline_backend": "auto",
    "pc_sampling": False,
    "device": None,
    "access_programs": 64,
}
FLAGS = {
    "cuda_graph": "--cuda-graph",
    "timeline_backend": "--timeline-backend",
    "pc_sampling": "--pc-sampling",
    "device": "--device",
    "access_programs": "--access-programs",
}
CHOICES = {"timeline_backend": ("auto", "nsys", "torch")}


@dataclass
class Job:
    """One live capture: the plan, the options, the run folder (``params`` is params.json's record, to which a
    backend adds what it ran), the inputs' seed, the device, and the clocks held around the capture."""

    plan: KernelPlan
    opts: RunOptions
    run_dir: Path
    seed: int
    device: ActiveDevice
    params: dict[str, Any]
    env: Measuring
    tools: dict[str, Any]  # what ``Backend.tools`` found
    clock_note: str = ""  # appended to the clocks' line (e.g. how ncu was told to treat the clocks)


@dataclass(frozen=True)
class Capture:
    """What a capture left: its files (by role) and what the run knew. An offline capture (``kbench analyze``)
    has only its files."""

    files: dict[str, Path]
    live: bool = True
    check: str | None = None  # the correctness check's line (None: skipped, or an offline capture)
    tiling: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)  # what the backend's analysis needs from its capture
    source: dict[str, Any] | None = None  # the source a child process ran (kbench.plan.sources.record); None: here
    # per stage, the loads and stores an access run of the same source traced on a CPU (the pipeline adds them)
    predicted: dict[str, Predicted] = field(default_factory=dict)


@dataclass(frozen=True)
class Context:
    """What analysis knows besides the capture: the plan (None: the capture alone), the device table, and the
    device a live run ran on (None: the one the capture names)."""

    plan: KernelPlan | None
    table: DeviceTable
    device: ActiveDevice | None = None


@dataclass(frozen=True)
class Analysis:
    """A backend's analysis: the core's figures and the sections only it can show."""

    device: ActiveDevice
    figures: PlanFigures
    timing_method: str
    sections: Sections
    plan_timing: TimingStats | None = None
    chart: str | None = None
    notes: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)  # added to params.json
    clock_note: str | None = None  # the clocks the capture itself recorded (ncu's SM clock), for the Clocks line
    data: Any = None  # what ``write`` needs beyond the result (tables, the report's kernels)


class Backend(Protocol):
    """A profiling mode. The pipeline calls ``tools`` before the run folder exists (a missing tool stops the run
    before anything is written), ``capture`` inside the clock lock, then ``analyse`` (pure: from files on disk,
    also for `kbench analyze`) and ``write`` (the mode's own files; report.md and result.json are the
    pipeline's)."""

    name: str
    options: frozenset[str]  # mode options it takes (MODE_OPTIONS)
    suffixes: tuple[str, ...]  # capture files `kbench analyze` hands it (empty: none)
    describes: str  # those files, in words: "Nsight Compute reports (.ncu-rep)"
    offline_key: str  # the Configuration column naming an offline capture
    default_bench_runs: int
    in_process: bool  # the plan runs in this process (torch imported here); False: in a child (ncu, nsys)
    needs_gpu: bool  # False: the mode runs on a CPU (access), predicting for the device ``RunOptions.device`` names

    def tools(self, opts: RunOptions) -> dict[str, Any]: ...

    def capture(self, job: Job) -> Capture: ...

    def open(self, path: Path) -> Capture: ...

    def analyse(self, capture: Capture, ctx: Context) -> Analysis: ...

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None: ...


class InProcessMode:
    """What the modes whose plan runs in kbench's own process (event, proton, intra) share: no external tool, 100
    repetitions by default, and no capture file of their own kind unless they say so."""

    options: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    describes = ""
    default_bench_runs = 100
    in_process = True
    needs_gpu = True

    def tools(self, opts: RunOptions) -> dict[str, Any]:
        return {}


def prepare_in_process(job: Job, watch: Stopwatch) -> tuple[Prepared, dict[str, dict[str, Any]]]:
    """The in-process modes' first steps on the GPU, each a phase of ``watch``: allocate, autotune and compile every
    stage, check it against the reference (unless the run skips the check), write its compiler artifacts. Returns
    the prepared plan and each stage's tiling record."""
    from kbench.capture.artifacts import write_stage
    from kbench.capture.prepare import checked, prepare_on_gpu

    plan, opts = job.plan, job.opts
    opts.progress(f"{plan.package} {plan.version}: allocating, autotuning, compiling")
    with watch.phase("allocation, autotuning, compilation and data flow"):
        prep = prepare_on_gpu(plan, job.device, job.seed)
    if opts.check:
        opts.progress("checking correctness against the reference")
        with watch.phase("correctness check"):
            job.params["correctness"] = checked(prep).line()
    with watch.phase("compiler artifacts"):
        tiling = {ps.stage.name: write_stage(job.run_dir, ps) for ps in prep.stages}
    return prep, tiling


class PartialCapture(KbenchError):
    """An analysis that yields files but no report.md (the report contract's classification cannot be decided from
    the capture); ``write`` puts them in a run folder and returns what it wrote as text."""

    def write(self, run_dir: Path) -> str:
        raise NotImplementedError
