"""The Python API: one function per profiling mode, each a thin call of the pipeline with the mode's name.

Every function profiles ``plan`` (or the same parameters in ``version``) into a new run folder under ``out_dir``
(default ``out/profiles``): ``<out_dir>/<mode>/<kernel>/<params>/<timestamp>/`` with report.md, result.json and
the mode's files, and returns the result: ``.out_dir``, ``.stages`` (per-stage figures), ``.report_md``,
``.sections`` (the mode's own sections). ``bench_runs`` None is the mode's default (100 timed repetitions or
iterations; the counter modes profile one launch per stage). Keyword options: ``check`` (default True),
``baseline`` (an earlier run folder), ``seed``, ``lock_clocks`` (None follows KBENCH_LOCK_CLOCKS, default on),
``wait`` (False stops at once when another kbench profiles on the same GPU), and the mode's own: event mode's
``cuda_graph``, nsys mode's ``backend`` ("auto": nsys, else the PyTorch profiler; "nsys"; "torch").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kbench.plan.base import KernelPlan
    from kbench.report.models import ProfileResult

# the API's names for mode options, where they differ from RunOptions'
ALIASES = {"backend": "timeline_backend"}


def profile_plan(
    mode: str,
    plan: KernelPlan,
    out_dir: Path | str | None = None,
    version: str | None = None,
    bench_runs: int | None = None,
    **options: Any,
) -> ProfileResult:
    """Profile ``plan`` in ``mode`` (any registered mode's name)."""
    from kbench import pipeline
    from kbench.modes import registry
    from kbench.modes.base import RunOptions
    from kbench.plan.discovery import with_version

    runs = bench_runs if bench_runs is not None else registry.get(mode).default_bench_runs
    opts = RunOptions.for_api(out_dir, runs, **{ALIASES.get(k, k): v for k, v in options.items()})
    return pipeline.profile(mode, with_version(plan, version) if version is not None else plan, opts)


class ModeFunction(Protocol):
    """``<mode>_profile_plan(plan, out_dir=None, version=None, bench_runs=None, **options)``."""

    def __call__(
        self,
        plan: KernelPlan,
        out_dir: Path | str | None = None,
        version: str | None = None,
        bench_runs: int | None = None,
        **options: Any,
    ) -> ProfileResult: ...


def _for(mode: str, what: str) -> ModeFunction:
    def profile(
        plan: KernelPlan,
        out_dir: Path | str | None = None,
        version: str | None = None,
        bench_runs: int | None = None,
        **options: Any,
    ) -> ProfileResult:
        return profile_plan(mode, plan, out_dir, version, bench_runs, **options)

    profile.__name__ = profile.__qualname__ = f"{mode}_profile_plan"
    profile.__doc__ = f"Profile ``plan`` in {mode} mode: {what} (options: see ``kbench.api``)."
    return profile


event_profile_plan = _for("event", "CUDA-event timings of each stage and the whole plan")
annotation_profile_plan = _for("annotation", "Nsight Compute with a short metric list per stage")
ncu_profile_plan = _for("ncu", "the full Nsight Compute set with source, rules, annotated source and SASS")
nsys_profile_plan = _for("nsys", "the plan's timeline over ``bench_runs`` iterations")
proton_profile_plan = _for("proton", "Triton's profiler (Proton) around each stage's repetitions, and its overhead")
intra_profile_plan = _for("intra", "the task timeline inside each kernel that records its tasks, and its overhead")
