"""nsys mode: the timeline of a plan (what happens between and around its kernels), captured by Nsight Systems
or, where nsys is missing or fails, by PyTorch's profiler (CUPTI); both feed one timeline table.

The plan runs in a child process (kbench.runtime.profiling.child): prepared and checked, then run
``bench_runs`` times as a whole inside NVTX ranges (and a concurrent plan's stages once each alone). nsys never
touches the GPU's clocks; kbench locks them around the capture when asked and permitted.
"""

from __future__ import annotations

import shlex
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kbench.errors import KbenchError, KernelError, UsageError
from kbench.fsutil import write_json_atomic
from kbench.plan.base import KernelPlan
from kbench.report.models import ProfileResult
from kbench.runtime import gpu, output, tools
from kbench.runtime.clocks import measuring
from kbench.runtime.profiling import timeline_run
from kbench.runtime.profiling.child import TORCH_TRACE
from kbench.runtime.profiling.child import command as child_command
from kbench.runtime.profiling.child import failure as child_failure
from kbench.runtime.profiling.nsys_argv import export_argv, profile_argv
from kbench.runtime.profiling.session import RunOptions, attach_baseline, fill_from_child, record_clocks, start_run

MODE = "nsys"
BACKENDS = ("auto", "nsys", "torch")
REPORT = "timeline"  # timeline.nsys-rep and timeline.sqlite
QDSTRM = "skipping importation of the QDSTRM file"
NO_IMPORTER = (
    "nsys wrote no report: its importer could not load ('Unable to retrieve the importer version'; the nsys inside "
    "Nsight Compute's folder lacks libdw.so.1): put elfutils' libdw.so.1 and libelf.so.1 on LD_LIBRARY_PATH, or "
    "install Nsight Systems"
)


class CaptureFailed(KbenchError):
    """nsys could not capture the timeline (not the plan's fault): in auto mode the PyTorch profiler takes over."""


def nsys_profile_plan(
    plan: KernelPlan,
    out_dir: Path | str | None = None,
    version: str | None = None,
    bench_runs: int = 100,
    *,
    check: bool = True,
    baseline: Path | str | None = None,
    seed: int | None = None,
    backend: str = "auto",
    lock_clocks: bool | None = None,
    wait: bool = True,
) -> ProfileResult:
    """Capture ``plan``'s timeline (or the same parameters in ``version``'s) over ``bench_runs`` iterations into
    ``<out_dir>/nsys/...``. ``backend``: "auto" (nsys, else the PyTorch profiler), "nsys" or "torch"."""
    if version is not None:
        plan = plan.with_version(version)
    opts = RunOptions.for_api(out_dir, bench_runs, check, baseline, seed, lock_clocks=lock_clocks, wait=wait)
    opts.timeline_backend = backend
    return run(plan, opts)


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


def run(plan: KernelPlan, opts: RunOptions) -> ProfileResult:
    gpu.require_cuda(f"--prof_type={MODE}")
    nsys, why_not = locate(opts.timeline_backend)
    versions: dict[str, Any] = {}
    if nsys is not None:
        try:
            versions["nsys"] = tools.version(nsys)
        except tools.ToolMissing as e:  # found but does not run
            if opts.timeline_backend == "nsys":
                raise
            nsys, why_not = None, str(e)
    named, device, run_dir, params, seed = start_run(MODE, plan, opts, versions)
    params.update(bench_runs=opts.bench_runs, timeline_backend=opts.timeline_backend)
    write_json_atomic(run_dir / output.PARAMS, params)
    with output.marked_on_failure(run_dir, params):
        return _run(plan, opts, nsys, why_not, device.name, run_dir, params, seed, named)


def _plan_failed(log: str, log_path: Path, tool: str) -> None:
    if line := child_failure(log):
        raise KernelError(f"the plan failed under {tool}: {line} (see {log_path})")


def capture_nsys(nsys: Path, child: list[str], run_dir: Path, opts: RunOptions, params: dict[str, Any]) -> Path:
    """Run the child under nsys and export the report to SQLite; CaptureFailed when nsys (not the plan) fails."""
    log_path = run_dir / "nsys.log"
    argv = profile_argv(nsys, run_dir / REPORT, child)
    params["nsys_command"] = shlex.join(argv)
    try:
        done = tools.run(argv, timeout_s=opts.timeout_s, log_path=log_path)
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


def capture_torch(child: list[str], run_dir: Path, opts: RunOptions) -> Path:
    log_path = run_dir / "child.log"
    done = tools.run(child, timeout_s=opts.timeout_s, log_path=log_path)
    _plan_failed(done.log, log_path, "the PyTorch profiler")
    trace = run_dir / TORCH_TRACE
    if done.returncode != 0 or not trace.exists():
        lines = [line for line in done.log.splitlines() if line.strip()]
        last = lines[-1].strip() if lines else f"exit code {done.returncode}"
        raise KbenchError(f"the PyTorch-profiler capture failed: {last} (see {log_path})")
    return trace


def _run(
    plan: KernelPlan,
    opts: RunOptions,
    nsys: Path | None,
    why_not: str,
    device_name: str,
    run_dir: Path,
    params: dict[str, Any],
    seed: int,
    named: ProfileResult | None,
) -> ProfileResult:
    what = f"{plan.package} {plan.version}: {opts.bench_runs} iteration(s) of the plan"

    def child(backend: str) -> list[str]:
        return child_command(
            plan, run_dir, seed, opts.check, program="timeline", backend=backend, iterations=opts.bench_runs
        )

    with measuring(opts.lock_clocks, opts.wait, opts.progress) as env, env.sampled():
        capture: Path | None = None
        started = time.monotonic()
        if nsys is not None:
            opts.progress(f"{what} under nsys")
            try:
                capture = capture_nsys(nsys, child("nsys"), run_dir, opts, params)
            except CaptureFailed as e:
                if opts.timeline_backend == "nsys":
                    raise CaptureFailed(f"{e}; --timeline-backend auto falls back to PyTorch's profiler") from None
                why_not = str(e)
                opts.progress(f"nsys failed ({why_not}); capturing with the PyTorch profiler instead")
                started = time.monotonic()
        if capture is None:
            opts.progress(f"{what} under the PyTorch profiler")
            capture = capture_torch(child("torch"), run_dir, opts)
        wall = time.monotonic() - started
    record_clocks(env, params)
    result, frame = timeline_run.build_result(capture, plan, device_name)
    backend = "nsys" if nsys is not None and not why_not else "torch"
    if backend == "nsys":
        result.capture = (
            f"Nsight Systems {params['tools']['nsys']} (`{REPORT}.nsys-rep`, exported to `{capture.name}`); "
            f"{wall:.1f} s of wall time for the capture and export"
        )
    else:
        import torch

        result.capture = (
            f"PyTorch profiler (CUPTI) in torch {torch.__version__} (`{capture.name}`); {wall:.1f} s of wall time "
            f"for the capture. nsys was not used: {why_not}"
        )
    fill_from_child(result, run_dir, params, env)
    result.notes = [
        f"wall time includes python start-up, autotuning (through the cache), compilation and the correctness "
        f"check in the child process; {opts.bench_runs} iteration(s) analysed"
    ]
    attach_baseline(result, opts, named, run_dir)
    timeline_run.write_outputs(result, frame, run_dir)
    params.update(
        status="ok",
        capture_backend=backend,
        capture_wall_s=round(wall, 2),
        nsys_not_used=why_not or None,
        finished_at=datetime.now(timezone.utc).isoformat(),
    )
    write_json_atomic(run_dir / output.PARAMS, params)
    return result
