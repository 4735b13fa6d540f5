"""ncu mode (the deep dive): `--set full --import-source yes`; report.md ranks Top 3 by ncu's rules'
estimated speedups, report-verbose.md holds every rule and metric, plus annotated source and SASS per stage."""

from __future__ import annotations

from pathlib import Path

from kbench.plan.base import KernelPlan
from kbench.report.models import ProfileResult
from kbench.runtime.profiling import counters_session
from kbench.runtime.profiling.session import RunOptions

MODE = "ncu"


def run(plan: KernelPlan, opts: RunOptions) -> ProfileResult:
    return counters_session.run(MODE, plan, opts)


def ncu_profile_plan(
    plan: KernelPlan,
    out_dir: Path | str | None = None,
    version: str | None = None,
    bench_runs: int = 1,
    *,
    check: bool = True,
    baseline: Path | str | None = None,
    seed: int | None = None,
    lock_clocks: bool | None = None,
    wait: bool = True,
) -> ProfileResult:
    """Profile ``plan`` (or the same parameters in ``version``) under ncu into ``<out_dir>/ncu/...``."""
    return counters_session.profile_plan(
        MODE, plan, out_dir, version, bench_runs, check, baseline, seed, lock_clocks, wait
    )
