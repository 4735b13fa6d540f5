"""Event mode: each stage and the whole plan timed with CUDA events; no hardware counters (TC%, DRAM%, Occ% n/a)."""

from __future__ import annotations

from pathlib import Path

from kbench.plan.base import KernelPlan
from kbench.report.models import ProfileResult
from kbench.runtime.prepare import Prepared
from kbench.runtime.profiling import session
from kbench.runtime.profiling.session import Measurement, RunOptions
from kbench.runtime.timing import time_cuda

MODE = "event"


def measure(prep: Prepared, opts: RunOptions) -> Measurement:
    stages = {ps.stage.name: time_cuda(ps.launch.fn, opts.bench_runs, cuda_graph=opts.cuda_graph) for ps in prep.stages}
    whole = time_cuda(prep.run_all, opts.bench_runs, cuda_graph=opts.cuda_graph)
    concurrency = None
    if prep.plan.concurrent():
        streams = len({ps.stage.stream for ps in prep.stages})
        concurrency = (
            f"This plan runs its stages concurrently on {streams} streams: event mode times each stage alone and "
            "the whole plan end to end (the whole-plan row), and cannot say how the stages overlapped; "
            "--prof_type=nsys shows the overlap, idle gaps and launch order."
        )
    return Measurement(stages=stages, plan=whole, method=whole.method, concurrency=concurrency)


def run(plan: KernelPlan, opts: RunOptions) -> ProfileResult:
    return session.run(MODE, measure, plan, opts)


def event_profile_plan(
    plan: KernelPlan,
    out_dir: Path | str | None = None,
    version: str | None = None,
    bench_runs: int = 100,
    *,
    check: bool = True,
    cuda_graph: bool = False,
    baseline: Path | str | None = None,
    seed: int | None = None,
    lock_clocks: bool | None = None,
    wait: bool = True,
) -> ProfileResult:
    """Profile ``plan`` (or the same parameters in ``version``) with CUDA events.

    ``out_dir`` is the root under which ``event/<kernel>/<params>/<timestamp>/`` is created
    (default ``out/profiles``). Returns the result: ``.out_dir``, ``.stages`` (per-stage figures), ``.report_md``.
    """
    if version is not None:
        plan = plan.with_version(version)
    opts = RunOptions.for_api(
        out_dir, bench_runs, check, baseline, seed, cuda_graph, lock_clocks=lock_clocks, wait=wait
    )
    return run(plan, opts)
