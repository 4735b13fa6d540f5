"""What annotation and ncu modes share: run the plan in a child process under ncu, then read the report.

The child (kbench.runtime.profiling.child) prepares, checks and writes the stage artifacts, then launches each
stage once inside its NVTX range; ncu profiles exactly those launches. ncu always gets --clock-control none:
kbench does not hold the clocks in this version, so ncu must not change them either.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kbench.analysis.compare import compare
from kbench.analysis.ncu import Kernel
from kbench.errors import KbenchError, KernelError
from kbench.fsutil import write_json_atomic
from kbench.plan.base import KernelPlan
from kbench.report.models import ProfileResult
from kbench.runtime import gpu, output, tools
from kbench.runtime.profiling import counters_run
from kbench.runtime.profiling.ncu_argv import ncu_argv, stage_range
from kbench.runtime.profiling.session import RunOptions, read_result, start_run

CLOCKS = "not locked; ncu ran with --clock-control none, so neither kbench nor ncu changed the GPU's clocks"
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
) -> ProfileResult:
    """The Python API of the counter modes; ``bench_runs`` is accepted for the common signature (ncu profiles
    one launch per stage)."""
    if version is not None:
        plan = plan.with_version(version)
    return run(mode, plan, RunOptions.for_api(out_dir, bench_runs, check, baseline, seed))


def run(mode: str, plan: KernelPlan, opts: RunOptions) -> ProfileResult:
    gpu.require_cuda(f"--prof_type={mode}")
    ncu = tools.find_ncu()
    ncu_version = tools.version(ncu)
    named, _, run_dir, params, seed = start_run(mode, plan, opts, {"ncu": ncu_version})
    params["clocks"] = CLOCKS
    write_json_atomic(run_dir / output.PARAMS, params)
    try:
        return _run(mode, plan, opts, ncu, run_dir, params, seed, named)
    except BaseException as e:
        output.mark_failed(run_dir, params, e)
        raise


def _failure(log: str, run_dir: Path, code: int) -> KbenchError:
    child = [line.removeprefix("kbench child: ") for line in log.splitlines() if line.startswith("kbench child: ")]
    if child:
        return KernelError(f"the plan failed under ncu: {child[-1]} (see {run_dir / 'ncu.log'})")
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
    spec = {
        "package": plan.package,
        "version": plan.version,
        "values": plan.values(),
        "seed": seed,
        "check": opts.check,
        "run_dir": str(run_dir),
        "kernel_path": _kernel_path(plan),
    }
    write_json_atomic(run_dir / "child-spec.json", spec)
    child = [sys.executable, "-m", "kbench.runtime.profiling.child", str(run_dir / "child-spec.json")]
    argv = ncu_argv(ncu, mode, stages, run_dir / "profile", child)
    params["ncu_command"] = shlex.join(argv)
    opts.progress(f"{plan.package} {plan.version}: ncu ({mode} mode) is profiling {len(stages)} stage(s)")
    started = time.monotonic()
    done = tools.run(argv, timeout_s=opts.timeout_s, log_path=run_dir / "ncu.log")
    wall = time.monotonic() - started
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
    info = json.loads((run_dir / "child.json").read_text())
    result, grouped = counters_run.build_result(rep, mode, plan)
    passes = max((c.replay_passes or 0) for c in result.counters)
    result.tiling = info["tiling"]
    result.check = info["check"]["line"] if info["check"] else None
    result.clocks = CLOCKS
    result.tools = params["tools"]
    result.out_dir = str(run_dir)
    result.conformance = conformance(plan, grouped, info["tiling"])
    result.notes = [
        f"ncu {params['tools']['ncu']}: {passes:.0f} replay passes per kernel; the ncu run took "
        f"{wall:.1f} s of wall time (python start-up, autotuning and compilation included)"
    ]
    prev_dir = opts.baseline if named is not None else output.previous_run(run_dir)
    previous = named or (read_result(prev_dir) if prev_dir is not None else None)
    if previous is not None and prev_dir is not None:
        result.baseline = compare(previous.figures, result.figures)
        result.baseline_from = f"`{prev_dir}` ({previous.kernel} {previous.version})"
    counters_run.write_outputs(result, grouped, rep, run_dir)
    params.update(
        status="ok", ncu_wall_s=round(wall, 2), replay_passes=passes, finished_at=datetime.now(timezone.utc).isoformat()
    )
    write_json_atomic(run_dir / output.PARAMS, params)
    return result


def _kernel_path(plan: KernelPlan) -> list[str]:
    """The folder a user plan came from, so the child finds it too."""
    module = sys.modules[type(plan).__module__]
    file = Path(module.__file__ or "")
    return [] if type(plan).__module__.startswith("kbench.") else [str(file.parent.parent)]


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
