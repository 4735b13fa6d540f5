"""The Python API: one function per profiling mode, each a thin call of the pipeline with the mode's name.

Every function profiles ``plan`` (or the same parameters in ``version``) into a new run folder under ``out_dir``
(default ``out/profiles``): ``<out_dir>/<mode>/<kernel>/<params>/<timestamp>/`` with report.md, result.json and
the mode's files. It returns the result: ``.out_dir``, ``.stages`` (per-stage figures), ``.report_md``,
``.sections`` (the mode's own sections). ``lock_clocks`` None follows KBENCH_LOCK_CLOCKS (default on); ``wait``
False stops at once when another kbench is profiling on the same GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbench.plan.base import KernelPlan
    from kbench.report.models import ProfileResult


def profile_plan(
    mode: str,
    plan: KernelPlan,
    out_dir: Path | str | None = None,
    version: str | None = None,
    bench_runs: int | None = None,
    *,
    check: bool = True,
    baseline: Path | str | None = None,
    seed: int | None = None,
    lock_clocks: bool | None = None,
    wait: bool = True,
    **mode_options: Any,
) -> ProfileResult:
    """Profile ``plan`` in ``mode`` (any registered mode); ``bench_runs`` None: the mode's default."""
    from kbench import pipeline
    from kbench.modes import registry
    from kbench.modes.base import RunOptions
    from kbench.plan.discovery import with_version

    runs = bench_runs if bench_runs is not None else registry.get(mode).default_bench_runs
    opts = RunOptions.for_api(out_dir, runs, check, baseline, seed, lock_clocks=lock_clocks, wait=wait, **mode_options)
    return pipeline.profile(mode, with_version(plan, version) if version is not None else plan, opts)


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
    """CUDA-event timings of each stage and the whole plan (``cuda_graph``: time CUDA-graph replays)."""
    return profile_plan(
        "event", plan, out_dir, version, bench_runs, check=check, baseline=baseline, seed=seed,
        lock_clocks=lock_clocks, wait=wait, cuda_graph=cuda_graph,
    )  # fmt: skip


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
    """Nsight Compute with a short metric list per stage (``bench_runs`` is accepted for the common signature:
    ncu profiles one launch per stage)."""
    return profile_plan(
        "annotation", plan, out_dir, version, bench_runs, check=check, baseline=baseline, seed=seed,
        lock_clocks=lock_clocks, wait=wait,
    )  # fmt: skip


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
    """The full Nsight Compute set with source: rules, report-verbose.md, annotated source and SASS."""
    return profile_plan(
        "ncu", plan, out_dir, version, bench_runs, check=check, baseline=baseline, seed=seed,
        lock_clocks=lock_clocks, wait=wait,
    )  # fmt: skip


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
    """The plan's timeline over ``bench_runs`` iterations; ``backend``: "auto" (nsys, else the PyTorch
    profiler), "nsys" or "torch"."""
    return profile_plan(
        "nsys", plan, out_dir, version, bench_runs, check=check, baseline=baseline, seed=seed,
        lock_clocks=lock_clocks, wait=wait, timeline_backend=backend,
    )  # fmt: skip
