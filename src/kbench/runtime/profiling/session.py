"""What every profiling mode shares: the run folder, params.json, preparation, analysis, the report.

A mode supplies one function, ``measure(prepared, options) -> Measurement``; everything before and after
it is here, so the modes stay small siblings behind the same surface.
"""

from __future__ import annotations

import logging
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kbench import nvml
from kbench.analysis.compare import compare
from kbench.analysis.devices import ActiveDevice, active_device, load_devices
from kbench.analysis.summary import summarize
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import KbenchError, KernelError
from kbench.fsutil import write_json_atomic
from kbench.plan import autotune
from kbench.plan.base import KernelPlan, Stage
from kbench.report.models import ProfileResult
from kbench.report.render import render_report
from kbench.runtime import gpu, output
from kbench.runtime.artifacts import write_stage
from kbench.runtime.prepare import TUNE_REPS, Prepared, check, prepare
from kbench.runtime.timing import Samples, time_cuda

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    out_root: Path = output.DEFAULT_ROOT
    bench_runs: int = 100
    check: bool = True
    cuda_graph: bool = False
    baseline: Path | None = None  # an earlier run folder to compare with; default: the previous one
    seed: int | None = None  # inputs' random seed; default: fresh each run
    progress: Callable[[str], None] = log.info


@dataclass
class Measurement:
    stages: dict[str, Samples]
    plan: Samples | None
    method: str
    notes: list[str] = field(default_factory=list)


Measure = Callable[[Prepared, RunOptions], Measurement]


def _clock_note(before: int | None, after: int | None) -> str:
    read = "not readable through NVML" if before is None or after is None else f"{before} MHz before, {after} MHz after"
    return f"not locked (kbench left the GPU's clocks alone); SM clock {read} the measurement"


def _baseline(run_dir: Path, named: Path | None) -> tuple[ProfileResult | None, Path | None]:
    path = named or output.previous_run(run_dir)
    if path is None:
        return None, None
    file = path / output.RESULT
    try:
        return ProfileResult.model_validate_json(file.read_text()), path
    except (OSError, ValueError) as e:
        if named:
            raise KbenchError(f"baseline {named} has no readable {output.RESULT} ({e}); name a finished run") from None
        log.warning("previous run %s has an unreadable %s; no baseline comparison", path, output.RESULT)
        return None, None


def run(mode: str, measure: Measure, plan: KernelPlan, opts: RunOptions) -> ProfileResult:
    """Profile ``plan`` with ``measure`` into a new run folder; on any failure the folder is marked failed."""
    gpu.require_cuda(f"--prof_type={mode}")
    if opts.bench_runs < 1:
        raise KbenchError("--bench-runs must be at least 1")
    table = load_devices()
    device: ActiveDevice = active_device(table)
    run_dir = output.new_run_dir(opts.out_root, mode, plan.package, plan.slug())
    seed = opts.seed if opts.seed is not None else time.time_ns() % (2**31)
    params: dict[str, Any] = {
        "kernel": plan.package,
        "version": plan.version,
        "mode": mode,
        "params": plan.values(),
        "device": {"name": device.name, "key": device.key, "known": device.known, "driver": device.driver},
        "tools": gpu.tool_versions(),
        "command": shlex.join(sys.orig_argv),
        "seed": seed,
        "bench_runs": opts.bench_runs,
        "cuda_graph": opts.cuda_graph,
        "check": opts.check,
        "started_at": datetime.now(timezone.utc).isoformat(),
        "status": "running",
    }
    write_json_atomic(run_dir / output.PARAMS, params)
    try:
        result = _run(mode, measure, plan, opts, device, run_dir, params, seed)
    except BaseException as e:
        output.mark_failed(run_dir, params, e)
        raise
    return result


def prepare_on_gpu(plan: KernelPlan, device: ActiveDevice, seed: int) -> Prepared:
    """Allocate, autotune (through the on-disk cache) and compile every stage on the current GPU."""
    import torch
    import triton

    toolchain = f"triton {triton.__version__}, torch {torch.__version__}"
    cache = autotune.cache_root()

    def cache_entry(stage: Stage) -> Path:
        return autotune.entry_path(
            cache, device.key or device.name, plan.package, plan.version, stage.name, plan.slug()
        )

    return prepare(
        plan,
        "cuda",
        seed=seed,
        cache_dir=cache_entry,
        toolchain=toolchain,
        time_us=lambda fn: TimingStats.of(time_cuda(fn, TUNE_REPS).us).median_us,
    )


def run_unprofiled(plan: KernelPlan, do_check: bool) -> str:
    """--prof_type=disabled: prepare, check, run every stage once with no profiler; a one-line summary."""
    import torch

    gpu.require_cuda("--prof_type=disabled")
    prep = prepare_on_gpu(plan, active_device(), time.time_ns() % (2**31))
    verdict = "check skipped (--no-check)"
    if do_check:
        result = check(prep, "cuda")
        if not result.passed:
            raise KernelError(f"correctness check failed: {result.line()}")
        verdict = result.line()
    prep.run_all()
    torch.cuda.synchronize()
    return f"{plan.package} {plan.version}: ran {len(prep.stages)} stage(s) once without a profiler; {verdict}"


def _run(
    mode: str,
    measure: Measure,
    plan: KernelPlan,
    opts: RunOptions,
    device: ActiveDevice,
    run_dir: Path,
    params: dict[str, Any],
    seed: int,
) -> ProfileResult:

    tools = params["tools"]
    opts.progress(f"{plan.package} {plan.version}: allocating, autotuning, compiling")
    prep = prepare_on_gpu(plan, device, seed)
    if opts.check:
        opts.progress("checking correctness against the reference")
        prep.check = check(prep, "cuda")
        params["correctness"] = prep.check.line()
        if not prep.check.passed:
            raise KernelError(f"correctness check failed: {prep.check.line()}; fix the kernel or rerun with --no-check")
    tiling = {ps.stage.name: write_stage(run_dir, ps) for ps in prep.stages}

    clock_before = nvml.sm_clock_mhz()
    opts.progress(f"measuring ({mode} mode, {opts.bench_runs} repetitions per stage)")
    m = measure(prep, opts)
    clocks = _clock_note(clock_before, nvml.sm_clock_mhz())

    stages = [ps.stage for ps in prep.stages]
    if device.spec is not None:
        ceilings = device.spec.ceilings()
    else:
        from kbench.runtime import ceilings as measured

        opts.progress(f"{device.name} is not in conf/devices.json: measuring copy bandwidth and matmul rate")
        ceilings = measured.measure({s.precision for s in stages})
    timings = {name: TimingStats.of(s.us) for name, s in m.stages.items()}
    figures = summarize(stages, timings, ceilings, roofline_known=device.known, device_name=device.name)
    result = ProfileResult(
        kernel=plan.package,
        version=plan.version,
        mode=mode,
        params=plan.values(),
        device=device.name,
        device_key=device.key,
        figures=figures,
        plan_timing=TimingStats.of(m.plan.us) if m.plan else None,
        timing_method=m.method,
        check=prep.check.line() if prep.check else None,
        clocks=clocks,
        tools=tools,
        tiling=tiling,
        notes=m.notes,
        out_dir=str(run_dir),
    )
    previous, prev_dir = _baseline(run_dir, opts.baseline)
    if previous is not None and prev_dir is not None:
        result.baseline = compare(previous.figures, figures)
        result.baseline_from = f"`{prev_dir}` ({previous.kernel} {previous.version})"

    write_json_atomic(
        run_dir / "timings.json",
        {
            "method": m.method,
            "stages": {k: {"samples_us": v.us, "warmup_reps": v.warmup_reps} for k, v in m.stages.items()},
            "plan": {"samples_us": m.plan.us, "warmup_reps": m.plan.warmup_reps} if m.plan else None,
        },
    )
    write_json_atomic(run_dir / output.RESULT, result.model_dump(mode="json", exclude={"report_md"}))
    result.report_md = render_report(result)
    (run_dir / "report.md").write_text(result.report_md)
    params.update(status="ok", clocks=clocks, finished_at=datetime.now(timezone.utc).isoformat())
    write_json_atomic(run_dir / output.PARAMS, params)
    return result
