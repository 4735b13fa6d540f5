"""What annotation and ncu modes share: run the plan in a child process under ncu, then read the report.

The child (kbench.runtime.profiling.child) prepares, checks and writes the stage artifacts, then launches each
stage once inside its NVTX range; ncu profiles exactly those launches. ncu gets --clock-control none whenever
the clocks are already held (by kbench or the lock script) or the user turned locking off; only when kbench
wanted to lock but was not permitted does ncu lock the base clock itself (--clock-control base).
"""

from __future__ import annotations

import shlex
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kbench.analysis.ncu import Kernel
from kbench.errors import KbenchError, KernelError
from kbench.fsutil import write_json_atomic
from kbench.plan.base import KernelPlan
from kbench.report.models import ProfileResult
from kbench.runtime import gpu, output, tools
from kbench.runtime.clocks import measuring
from kbench.runtime.profiling import counters_run
from kbench.runtime.profiling.child import command as child_command
from kbench.runtime.profiling.child import failure as child_failure
from kbench.runtime.profiling.ncu_argv import ncu_argv, stage_range
from kbench.runtime.profiling.session import (
    RunOptions,
    attach_baseline,
    fill_from_child,
    record_clocks,
    start_run,
)

PERMISSION = (
    "ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or let all users profile "
    "(nvidia driver option NVreg_RestrictProfilingToAdminUsers=0; https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)


def profile_plan(
    mode: str,
    plan: KernelPlan,
    out_dir: Path | str | None,
    version: str | None,
    bench_runs: int,
    check: bool,
    baseline: Path | str | None,
    seed: int | None,
    lock_clocks: bool | None = None,
    wait: bool = True,
) -> ProfileResult:
    """The Python API of the counter modes; ``bench_runs`` is accepted for the common signature (ncu profiles
    one launch per stage)."""
    if version is not None:
        plan = plan.with_version(version)
    return run(
        mode, plan, RunOptions.for_api(out_dir, bench_runs, check, baseline, seed, lock_clocks=lock_clocks, wait=wait)
    )


def run(mode: str, plan: KernelPlan, opts: RunOptions) -> ProfileResult:
    gpu.require_cuda(f"--prof_type={mode}")
    ncu = tools.find_ncu()
    ncu_version = tools.version(ncu)
    named, _, run_dir, params, seed = start_run(mode, plan, opts, {"ncu": ncu_version})
    write_json_atomic(run_dir / output.PARAMS, params)
    with output.marked_on_failure(run_dir, params):
        return _run(mode, plan, opts, ncu, run_dir, params, seed, named)


def _failure(log: str, run_dir: Path, code: int) -> KbenchError:
    if child := child_failure(log):
        return KernelError(f"the plan failed under ncu: {child} (see {run_dir / 'ncu.log'})")
    errors = [line for line in log.splitlines() if "==ERROR==" in line]
    last = errors[-1].strip() if errors else f"exit code {code}"
    return KbenchError(f"ncu failed: {last} (see {run_dir / 'ncu.log'})")


def _run(
    mode: str,
    plan: KernelPlan,
    opts: RunOptions,
    ncu: Path,
    run_dir: Path,
    params: dict[str, Any],
    seed: int,
    named: ProfileResult | None,
) -> ProfileResult:
    stages = [s.name for s in plan.checked_stages()]
    child = child_command(plan, run_dir, seed, opts.check)
    with measuring(opts.lock_clocks, opts.wait, opts.progress) as env:
        control = "none" if env.clocks.locked or not opts.lock_clocks else "base"
        argv = ncu_argv(ncu, mode, stages, run_dir / "profile", child, clock_control=control)
        params["ncu_command"] = shlex.join(argv)
        opts.progress(f"{plan.package} {plan.version}: ncu ({mode} mode) is profiling {len(stages)} stage(s)")
        started = time.monotonic()
        with env.sampled():
            done = tools.run(argv, timeout_s=opts.timeout_s, log_path=run_dir / "ncu.log")
        wall = time.monotonic() - started
    params["clocks"] = record_clocks(env, params) + f"; ncu ran with --clock-control {control}"
    log = done.log
    if "ERR_NVGPUCTRPERM" in log:
        raise KbenchError(PERMISSION)
    if done.returncode != 0:
        raise _failure(log, run_dir, done.returncode)
    rep = run_dir / "profile.ncu-rep"
    if "No kernels were profiled" in log or not rep.exists():
        ranges = ", ".join(stage_range(s) for s in stages)
        raise KbenchError(
            f"ncu profiled no kernel: nothing launched inside the NVTX range(s) {ranges} (see {run_dir / 'ncu.log'})"
        )
    result, grouped = counters_run.build_result(rep, mode, plan)
    passes = max((c.replay_passes or 0) for c in result.counters)
    fill_from_child(result, run_dir, params, env)
    result.conformance = conformance(plan, grouped, result.tiling)
    result.notes = [
        f"ncu {params['tools']['ncu']}: {passes:.0f} replay passes per kernel; the ncu run took "
        f"{wall:.1f} s of wall time (python start-up, autotuning and compilation included)"
    ]
    attach_baseline(result, opts, named, run_dir)
    counters_run.write_outputs(result, grouped, rep, run_dir)
    params.update(
        status="ok", ncu_wall_s=round(wall, 2), replay_passes=passes, finished_at=datetime.now(timezone.utc).isoformat()
    )
    write_json_atomic(run_dir / output.PARAMS, params)
    return result


def conformance(
    plan: KernelPlan, grouped: list[tuple[str, list[Kernel]]], tiling: dict[str, Any]
) -> list[dict[str, str]]:
    rows = []
    declared = {s.name: list(s.kernels) for s in plan.checked_stages()}
    for stage, ks in grouped:
        names = sorted({k.name for k in ks})
        want = declared.get(stage, [])
        grid = tiling.get(stage, {}).get("grid")
        seen = sorted({str(k.grid[0] * k.grid[1] * k.grid[2]) for k in ks if k.grid})
        plan_grid = "n/a" if not grid else str(_product(grid))
        if not want:
            verdict = "library stage: kernels not declared"
        elif set(names) <= set(want) and (plan_grid == "n/a" or seen == [plan_grid]):
            verdict = "as declared"
        else:
            verdict = "differs from the plan"
        rows.append(
            {
                "stage": stage,
                "declared": ", ".join(want) or "(library)",
                "observed": ", ".join(names),
                "launches": str(len(ks)),
                "plan_grid": plan_grid,
                "observed_grid": ", ".join(seen) or "n/a",
                "verdict": verdict,
            }
        )
    return rows


def _product(dims: list[int]) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out
