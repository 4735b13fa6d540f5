"""annotation mode (the default first pass): a short ncu metric list per stage (replay passes reported),
classified by TC%/DRAM% and put on the roofline; Top 3 from each stage's distance to its roofline."""

from __future__ import annotations

from pathlib import Path

from kbench.plan.base import KernelPlan
from kbench.report.models import ProfileResult
from kbench.runtime.profiling import counters_session
from kbench.runtime.profiling.session import RunOptions

MODE = "annotation"


def run(plan: KernelPlan, opts: RunOptions) -> ProfileResult:
    return counters_session.run(MODE, plan, opts)


def annotation_profile_plan(
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
    """Profile ``plan`` (or the same parameters in ``version``) under ncu into ``<out_dir>/annotation/...``."""
    return counters_session.profile_plan(
        MODE, plan, out_dir, version, bench_runs, check, baseline, seed, lock_clocks, wait
    )
