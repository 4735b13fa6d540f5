"""What every profiling mode shares: the run folder, params.json, preparation, analysis, the report.

A mode supplies one function, ``measure(prepared, options) -> Measurement``; everything before and after
it is here, so the modes stay small siblings behind the same surface.
"""

from __future__ import annotations

import json
import logging
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

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
from kbench.runtime.clocks import Measuring, lock_by_default, measuring
from kbench.runtime.prepare import TUNE_REPS, Prepared, check, guarded, prepare
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
    timeout_s: float = 1800.0  # ncu and nsys modes: the whole profiler run
    timeline_backend: str = "auto"  # nsys mode: "auto" (nsys, else the PyTorch profiler), "nsys" or "torch"
    lock_clocks: bool = field(default_factory=lock_by_default)  # lock SM (and memory) clocks when permitted
    wait: bool = True  # queue behind another kbench on the same GPU (False: stop at once)
    progress: Callable[[str], None] = log.info

    @classmethod
    def for_api(
        cls,
        out_dir: Path | str | None,
        bench_runs: int,
        check: bool,
        baseline: Path | str | None,
        seed: int | None,
        cuda_graph: bool = False,
        *,
        lock_clocks: bool | None = None,
        wait: bool = True,
    ) -> RunOptions:
        """Options from the ``<mode>_profile_plan`` keyword arguments (``lock_clocks`` None: KBENCH_LOCK_CLOCKS,
        default on)."""
        return cls(
            out_root=Path(out_dir) if out_dir is not None else cls.out_root,
            bench_runs=bench_runs,
            check=check,
            cuda_graph=cuda_graph,
            baseline=Path(baseline) if baseline is not None else None,
            seed=seed,
            lock_clocks=lock_by_default() if lock_clocks is None else lock_clocks,
            wait=wait,
        )


@dataclass
class Measurement:
    stages: dict[str, Samples]
    plan: Samples | None
    method: str
    notes: list[str] = field(default_factory=list)
    concurrency: str | None = None  # a plan on several streams: what the measurement can and cannot say


Measure = Callable[[Prepared, RunOptions], Measurement]


def record_clocks(env: Measuring, params: dict[str, Any]) -> str:
    """The clocks' one-line account (report) and every figure behind it (params.json)."""
    params["clocks"] = env.line()
    params["clock_samples"] = env.summary.model_dump() if env.summary else None
    params["clock_notes"] = env.clocks.notes
    return env.line()


def fill_from_child(result: ProfileResult, run_dir: Path, params: dict[str, Any], env: Measuring) -> None:
    """What a profiler-driven mode's result takes from its run: the child process's tiling and correctness check
    (child.json), the clocks, the tool versions and the folder."""
    from kbench.runtime.profiling.child import OUTCOME

    info = json.loads((run_dir / OUTCOME).read_text())
    result.tiling = info["tiling"]
    result.check = info["check"]["line"] if info["check"] else None
    result.clocks, result.clock_summary = params["clocks"], env.summary
    result.tools = params["tools"]
    result.out_dir = str(run_dir)


def read_result(run_dir: Path) -> ProfileResult | None:
    """The result.json of a finished run, or None when it is missing or unreadable."""
    try:
        return ProfileResult.model_validate_json((run_dir / output.RESULT).read_text())
    except (OSError, ValueError):
        return None


def named_baseline(path: Path, plan: KernelPlan) -> ProfileResult:
    """A baseline the user named: a finished run of the same kernel and parameters (checked before running)."""
    previous = read_result(path)
    if previous is None:
        raise KbenchError(f"--baseline {path} has no readable {output.RESULT}; name the folder of a finished run")
    if previous.kernel != plan.package or previous.params != plan.values():
        raise KbenchError(
            f"--baseline {path} profiled {previous.kernel} {previous.params}, not {plan.package} {plan.values()}; "
            "a baseline must have the same kernel and parameters"
        )
    return previous


def attach_baseline(result: ProfileResult, opts: RunOptions, named: ProfileResult | None, run_dir: Path) -> None:
    """``## vs Baseline``: against the run the user named, else the previous run of the same kernel and
    parameters (whole-plan medians first when both runs measured one)."""
    prev_dir = opts.baseline if named is not None else output.previous_run(run_dir)
    previous = named or (read_result(prev_dir) if prev_dir is not None else None)
    if previous is not None and prev_dir is not None:
        prev_plan = previous.plan_timing.median_us if previous.plan_timing else None
        cur_plan = result.plan_timing.median_us if result.plan_timing else None
        result.baseline = compare(previous.figures, result.figures, prev_plan, cur_plan)
        result.baseline_from = f"`{prev_dir}` ({previous.kernel} {previous.version})"
    elif prev_dir is not None:
        log.warning("previous run %s has no readable %s; no baseline comparison", prev_dir, output.RESULT)


def analyzed_run(
    result: ProfileResult, source: Path, out_root: Path, slug: str, write: Callable[[Path], None]
) -> ProfileResult:
    """`kbench analyze`: a new run folder for the reports of an existing capture (copied in beside them);
    ``write(run_dir)`` writes the reports. A failure marks the folder, as a live run's would."""
    run_dir = output.new_run_dir(out_root, result.mode, result.kernel, slug)
    params = {
        "kernel": result.kernel,
        "version": result.version,
        "mode": result.mode,
        "params": result.params,
        "device": {"name": result.device, "key": result.device_key},
        "source": str(source),
        "command": shlex.join(sys.orig_argv),
        "analyzed_at": datetime.now(timezone.utc).isoformat(),
        "status": "running",
    }
    write_json_atomic(run_dir / output.PARAMS, params)
    with output.marked_on_failure(run_dir, params):
        shutil.copy2(source, run_dir / source.name)
        result.out_dir, result.offline = str(run_dir), True
        write(run_dir)
    write_json_atomic(run_dir / output.PARAMS, {**params, "status": "ok"})
    return result


def start_run(
    mode: str, plan: KernelPlan, opts: RunOptions, tools: dict[str, Any] | None = None
) -> tuple[ProfileResult | None, ActiveDevice, Path, dict[str, Any], int]:
    """What every mode does first: the named baseline checked, the device found, a new run folder, the seed,
    and params.json's common fields (the caller adds its own and writes it)."""
    if opts.bench_runs < 1:
        raise KbenchError("--bench-runs must be at least 1")
    named = named_baseline(opts.baseline, plan) if opts.baseline is not None else None
    device = active_device(load_devices())
    run_dir = output.new_run_dir(opts.out_root, mode, plan.package, plan.slug())
    seed = opts.seed if opts.seed is not None else time.time_ns() % (2**31)
    params: dict[str, Any] = {
        "kernel": plan.package,
        "version": plan.version,
        "mode": mode,
        "params": plan.values(),
        "device": {"name": device.name, "key": device.key, "known": device.known, "driver": device.driver},
        "tools": {**gpu.tool_versions(), **(tools or {})},
        "command": shlex.join(sys.orig_argv),
        "seed": seed,
        "check": opts.check,
        "started_at": datetime.now(timezone.utc).isoformat(),
        "status": "running",
    }
    return named, device, run_dir, params, seed


def run(mode: str, measure: Measure, plan: KernelPlan, opts: RunOptions) -> ProfileResult:
    """Profile ``plan`` with ``measure`` into a new run folder; on any failure the folder is marked failed."""
    gpu.require_cuda(f"--prof_type={mode}")
    named, device, run_dir, params, seed = start_run(mode, plan, opts)
    params.update(bench_runs=opts.bench_runs, cuda_graph=opts.cuda_graph)
    write_json_atomic(run_dir / output.PARAMS, params)
    with output.marked_on_failure(run_dir, params):
        return _run(mode, measure, plan, opts, device, run_dir, params, seed, named)


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
    named: ProfileResult | None,
) -> ProfileResult:

    tools = params["tools"]
    with measuring(opts.lock_clocks, opts.wait, opts.progress) as env:
        opts.progress(f"{plan.package} {plan.version}: allocating, autotuning, compiling")
        prep = prepare_on_gpu(plan, device, seed)
        if opts.check:
            opts.progress("checking correctness against the reference")
            prep.check = check(prep, "cuda")
            params["correctness"] = prep.check.line()
            if not prep.check.passed:
                # a fast but wrong config must not stay cached as "the best"
                dropped = [
                    ps.stage.name for ps in prep.stages if ps.tune.source != "fixed" and autotune.forget(ps.tune.path)
                ]
                hint = f" (dropped the autotune cache entry of {', '.join(dropped)})" if dropped else ""
                raise KernelError(
                    f"correctness check failed: {prep.check.line()}{hint}; `kbench check {plan.package} "
                    f"{plan.version}` checks every tuning config, or rerun with --no-check"
                )
        tiling = {ps.stage.name: write_stage(run_dir, ps) for ps in prep.stages}
        opts.progress(f"measuring ({mode} mode, {opts.bench_runs} repetitions per stage)")
        with env.sampled():
            m: Measurement = guarded("(measurement)", lambda: measure(prep, opts))
    clocks = record_clocks(env, params)
    # the raw samples are kept before any analysis that could fail
    write_json_atomic(
        run_dir / "timings.json",
        {
            "method": m.method,
            "stages": {k: {"samples_us": v.us, "warmup_reps": v.warmup_reps} for k, v in m.stages.items()},
            "plan": {"samples_us": m.plan.us, "warmup_reps": m.plan.warmup_reps} if m.plan else None,
        },
    )

    stages = [ps.stage for ps in prep.stages]
    if device.spec is not None:
        ceilings = device.spec.ceilings()
    else:
        from kbench.runtime import ceilings as measured

        opts.progress(f"{device.name} is not in conf/devices.json: measuring copy bandwidth and matmul rate")
        ceilings = guarded("(ceiling measurement)", lambda: measured.measure({s.precision for s in stages}))
        write_json_atomic(run_dir / "ceilings.json", {p: vars(c) for p, c in ceilings.items()})
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
        clock_summary=env.summary,
        tools=tools,
        tiling=tiling,
        notes=m.notes,
        concurrency=m.concurrency,
        out_dir=str(run_dir),
    )
    attach_baseline(result, opts, named, run_dir)
    write_json_atomic(run_dir / output.RESULT, result.model_dump(mode="json", exclude={"report_md"}))
    result.report_md = render_report(result)
    (run_dir / "report.md").write_text(result.report_md)
    params.update(status="ok", finished_at=datetime.now(timezone.utc).isoformat())
    write_json_atomic(run_dir / output.PARAMS, params)
    return result
