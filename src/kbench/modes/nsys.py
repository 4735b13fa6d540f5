"""nsys mode: the timeline of a plan (what happens between and around its kernels), captured by Nsight Systems
or, where nsys is missing or fails, by PyTorch's profiler (CUPTI); both feed one timeline table.

The plan runs in a child process (kbench.capture.child): prepared and checked, then run ``bench_runs`` times as a
whole inside NVTX ranges (and a concurrent plan's stages that many times each alone). nsys never touches the
GPU's clocks; kbench locks them around the capture when asked and permitted.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

from kbench.analysis import timeline as tl
from kbench.analysis import timeline_stages as ts
from kbench.analysis.devices import resolve
from kbench.analysis.figures import Facts, Undecided, from_timeline
from kbench.analysis.kernels import declared_kernels
from kbench.analysis.timeline_kernels import source_of, stage_kernels
from kbench.capture import child, tools
from kbench.capture.nsys_argv import export_argv, profile_argv
from kbench.errors import KbenchError, KernelError, UsageError
from kbench.fsutil import write_text_atomic
from kbench.modes.base import Analysis, Capture, Context, Job, PartialCapture, RunOptions
from kbench.report import chart, timeline_chart
from kbench.report.mode_sections import ModeSections, Timeline, TimelinePicture
from kbench.report.models import ProfileResult
from kbench.report.trace import chrome_trace

BACKENDS = ("auto", "nsys", "torch")
REPORT = "timeline"  # timeline.nsys-rep and timeline.sqlite
TRACE = "trace.json"
TIMELINE_MD = "timeline.md"  # an undecided timeline's summary, where no report.md can be written
QDSTRM = "skipping importation of the QDSTRM file"
NO_IMPORTER = (
    "nsys wrote no report: its importer could not load ('Unable to retrieve the importer version'; the nsys inside "
    "Nsight Compute's folder lacks libdw.so.1): put elfutils' libdw.so.1 and libelf.so.1 on LD_LIBRARY_PATH, or "
    "install Nsight Systems"
)


class CaptureFailed(KbenchError):
    """nsys could not capture the timeline (not the plan's fault): in auto mode the PyTorch profiler takes over."""


def locate(backend: str) -> tuple[Path | None, str]:
    """The nsys to use (None: use the PyTorch profiler) and, when there is none, why."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown timeline backend {backend}; choose one of {', '.join(BACKENDS)}")
    if backend == "torch":
        return None, "the PyTorch profiler was asked for (--timeline-backend torch)"
    try:
        return tools.find_nsys(), ""
    except tools.ToolMissing as e:
        if backend == "nsys":
            raise
        return None, str(e)


def _plan_failed(log: str, log_path: Path, tool: str) -> None:
    if line := child.failure(log):
        raise KernelError(f"the plan failed under {tool}: {line} (see {log_path})")


def capture_nsys(nsys: Path, argv_child: list[str], run_dir: Path, opts: RunOptions, params: dict[str, Any]) -> Path:
    """Run the child under nsys and export the report to SQLite; CaptureFailed when nsys (not the plan) fails."""
    log_path = run_dir / "nsys.log"
    argv = profile_argv(nsys, run_dir / REPORT, argv_child)
    params["nsys_command"] = shlex.join(argv)
    try:
        # nsys starts the profiled program and its agent in sessions of their own: end them with it on interrupt
        strays = (argv_child[-1], "--session-name profile-{pid}")
        done = tools.run(argv, timeout_s=opts.timeout_s, log_path=log_path, strays=strays)
    except tools.ToolMissing as e:
        raise CaptureFailed(str(e)) from None
    _plan_failed(done.log, log_path, "nsys")
    rep = run_dir / f"{REPORT}.nsys-rep"
    if QDSTRM in done.log or (done.returncode == 0 and not rep.exists()):
        raise CaptureFailed(f"{NO_IMPORTER} (see {log_path})")
    if done.returncode != 0 or not rep.exists():
        errors = [line.strip() for line in done.log.splitlines() if "error" in line.lower()]
        raise CaptureFailed(f"nsys failed: {errors[-1] if errors else f'exit code {done.returncode}'} (see {log_path})")
    sqlite = run_dir / f"{REPORT}.sqlite"
    argv = export_argv(nsys, rep, sqlite)
    params["nsys_export_command"] = shlex.join(argv)
    done = tools.run(argv, timeout_s=opts.timeout_s, log_path=run_dir / "nsys-export.log")
    if done.returncode != 0 or not sqlite.exists():
        raise CaptureFailed(f"nsys export to SQLite failed (exit code {done.returncode}; see nsys-export.log)")
    return sqlite


def capture_torch(argv_child: list[str], run_dir: Path, opts: RunOptions) -> Path:
    log_path = run_dir / "child.log"
    done = tools.run(argv_child, timeout_s=opts.timeout_s, log_path=log_path)
    _plan_failed(done.log, log_path, "the PyTorch profiler")
    trace = run_dir / child.TORCH_TRACE
    if done.returncode != 0 or not trace.exists():
        lines = [line for line in done.log.splitlines() if line.strip()]
        last = lines[-1].strip() if lines else f"exit code {done.returncode}"
        raise KbenchError(f"the PyTorch-profiler capture failed: {last} (see {log_path})")
    return trace


class Nsys:
    name = "nsys"
    options = frozenset({"timeline_backend"})
    suffixes = (".sqlite", ".json")
    describes = "nsys SQLite exports (.sqlite) and PyTorch-profiler traces (.json)"
    offline_key = "capture"
    default_bench_runs = 100
    in_process = False
    needs_gpu = True

    def tools(self, opts: RunOptions) -> dict[str, Any]:
        nsys, why_not = locate(opts.timeline_backend)
        versions: dict[str, Any] = {}
        if nsys is not None:
            try:
                versions["nsys"] = tools.version(nsys)
            except tools.ToolMissing as e:  # found but does not run
                if opts.timeline_backend == "nsys":
                    raise
                nsys, why_not = None, str(e)
        return {"nsys": nsys, "why_not": why_not, "versions": versions}

    def capture(self, job: Job) -> Capture:
        plan, opts, run_dir = job.plan, job.opts, job.run_dir
        nsys: Path | None = job.tools["nsys"]
        why_not: str = job.tools["why_not"]
        job.params.update(bench_runs=opts.bench_runs, timeline_backend=opts.timeline_backend)
        what = f"{plan.package} {plan.version}: {opts.bench_runs} iteration(s) of the plan"

        def argv_child(backend: str) -> list[str]:
            return child.command(
                plan, run_dir, job.seed, opts.check, program="timeline", backend=backend, iterations=opts.bench_runs
            )

        chart.import_meanwhile()  # the timeline picture's matplotlib, loaded while the profiler runs
        with job.env.sampled():
            found: Path | None = None
            started = time.monotonic()
            if nsys is not None:
                opts.progress(f"{what} under nsys")
                try:
                    found = capture_nsys(nsys, argv_child("nsys"), run_dir, opts, job.params)
                except CaptureFailed as e:
                    if opts.timeline_backend == "nsys":
                        raise CaptureFailed(f"{e}; --timeline-backend auto falls back to PyTorch's profiler") from None
                    why_not = str(e)
                    opts.progress(f"nsys failed ({why_not}); capturing with the PyTorch profiler instead")
                    started = time.monotonic()
            if found is None:
                opts.progress(f"{what} under the PyTorch profiler")
                found = capture_torch(argv_child("torch"), run_dir, opts)
            wall = time.monotonic() - started
        if nsys is not None and not why_not:
            backend = "nsys"
            described = (
                f"Nsight Systems {job.tools['versions']['nsys']} (`{REPORT}.nsys-rep`, exported to `{found.name}`); "
                f"{wall:.1f} s of wall time for the capture and export"
            )
        else:
            import torch

            backend = "torch"
            described = (
                f"PyTorch profiler (CUPTI) in torch {torch.__version__} (`{found.name}`); {wall:.1f} s of wall time "
                f"for the capture. nsys was not used: {why_not}"
            )
        job.params.update(capture_backend=backend, capture_wall_s=round(wall, 2), nsys_not_used=why_not or None)
        fields, _ = child.reported(run_dir)
        return Capture(
            files={"timeline": found}, facts={"described": described, "iterations": opts.bench_runs}, **fields
        )

    def open(self, path: Path) -> Capture:
        return Capture(files={"timeline": path}, live=False)

    def analyse(self, capture: Capture, ctx: Context) -> Analysis:
        path = capture.files["timeline"]
        frame = tl.load(path)
        stages = ctx.plan.checked_stages() if ctx.plan else None
        specs = [ts.StageSpec(s.name, s.stream, tuple(s.after)) for s in stages] if stages else None
        analysis = ts.analyze(frame, ts.backend_of(path.suffix), path.name, specs)
        device = ctx.device or resolve(ctx.table, tl.device_name(path) or "unknown device")
        try:
            figures = from_timeline(
                analysis,
                stages,
                device.ceilings(),
                roofline_known=device.known,
                device_name=device.name,
                facts=Facts.of(
                    device,
                    capture.tiling,
                    capture.predicted,
                    kernels=stage_kernels(frame, analysis, declared_kernels(stages or []), source_of(path.suffix)),
                ),
            )
        except Undecided as e:
            raise UndecidedTimeline(str(e), frame, analysis, f"{analysis.backend} (`{path.name}`)") from None
        notes = []
        if capture.live:
            notes.append(
                "wall time includes python start-up, autotuning (through the cache), compilation and the correctness "
                f"check in the child process; {capture.facts['iterations']} iteration(s) analysed"
            )
        return Analysis(
            device=device,
            figures=figures,
            timing_method=(
                f"{analysis.backend} timeline: each stage's duration is the median over {len(analysis.windows)} "
                "window(s) of the span from its first GPU start to its last GPU end"
            ),
            plan_timing=analysis.span_us,
            sections=ModeSections(
                timeline=Timeline(
                    analysis=analysis,
                    capture=capture.facts.get("described", f"{analysis.backend} (`{path.name}`)"),
                    picture=picture(frame, analysis),
                )
            ),
            notes=notes,
            data=frame,
        )

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None:
        """timeline.csv (the normalized table), one CSV per analysis, trace.json (Chrome trace), timeline.png."""
        assert isinstance(result.sections, ModeSections) and result.sections.timeline is not None
        title = f"{result.kernel} {result.version} on {result.device}, {result.sections.timeline.analysis.backend}"
        write_timeline(analysis.data, result.sections.timeline.analysis, run_dir, title)


def picture(frame: Any, analysis: ts.TimelineAnalysis) -> TimelinePicture:
    """The timeline picture ``write_timeline`` draws, and which stretch of the capture it shows."""
    return TimelinePicture(file=timeline_chart.FILE, what=timeline_chart.described(frame, analysis))


def write_timeline(frame: Any, analysis: ts.TimelineAnalysis, run_dir: Path, title: str) -> None:
    """timeline.csv (the normalized table), one CSV per analysis, trace.json (Chrome trace), the picture."""
    frame.to_csv(run_dir / "timeline.csv", index=False)
    for name, table in ts.frames(analysis).items():
        table.to_csv(run_dir / f"{name}.csv", index=False)
    write_text_atomic(run_dir / TRACE, json.dumps(chrome_trace(frame)))
    timeline_chart.timeline_png(frame, analysis, run_dir / timeline_chart.FILE, title)


class UndecidedTimeline(PartialCapture):
    """An offline timeline analysed into its tables, trace and timeline.md, with no report.md: the GPU was busy
    and nothing tells memory- from compute-bound. ``write`` puts the files in a run folder."""

    def __init__(self, why: str, frame: Any, analysis: ts.TimelineAnalysis, capture: str) -> None:
        super().__init__(why)
        self.frame, self.analysis, self.capture = frame, analysis, capture

    def write(self, run_dir: Path) -> str:
        """The timeline's files and timeline.md (what was decided and what was not); its text."""
        from kbench.report.render import render_timeline_only

        write_timeline(self.frame, self.analysis, run_dir, f"{self.analysis.source}, {self.analysis.backend}")
        text = render_timeline_only(self.analysis, self.capture, str(self), picture(self.frame, self.analysis))
        write_text_atomic(run_dir / TIMELINE_MD, text)
        return text


NSYS = Nsys()
