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

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kbench.errors import UsageError

if TYPE_CHECKING:
    from kbench.plan.base import KernelPlan
    from kbench.report.models import ProfileResult
    from kbench.sweep import Row, Swept

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


def _for(mode: str) -> ModeFunction:
    def profile(
        plan: KernelPlan,
        out_dir: Path | str | None = None,
        version: str | None = None,
        bench_runs: int | None = None,
        **options: Any,
    ) -> ProfileResult:
        return profile_plan(mode, plan, out_dir, version, bench_runs, **options)

    profile.__name__ = profile.__qualname__ = f"{mode}_profile_plan"
    from kbench.modes.registry import SUMMARY

    profile.__doc__ = f"Profile ``plan`` in {mode} mode: {SUMMARY[mode]} (options: see ``kbench.api``)."
    return profile


event_profile_plan = _for("event")
annotation_profile_plan = _for("annotation")
ncu_profile_plan = _for("ncu")
nsys_profile_plan = _for("nsys")
proton_profile_plan = _for("proton")
intra_profile_plan = _for("intra")
access_profile_plan = _for("access")


EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class SweepExecutor:
    """How a sweep's points run: ``local`` (this process, or one worker process per index in ``gpus``) or ``ray``
    (each point a Ray task of one GPU on the cluster at ``ray_address``, retried ``ray_retries`` times when its worker
    dies, large captures fetched only with ``fetch_captures``). Checked when made: a bad combination is one line."""

    kind: str = "local"
    gpus: tuple[str, ...] = ()
    ray_address: str | None = None
    ray_retries: int | None = None
    fetch_captures: bool = False

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise UsageError(f"--executor {self.kind}: one of {', '.join(EXECUTORS)}")
        if self.kind == "ray" and self.gpus:
            raise UsageError("--gpus is the local executor's; with --executor ray each point gets a GPU of the cluster")
        if self.kind != "ray" and (self.ray_address is not None or self.ray_retries is not None or self.fetch_captures):
            raise UsageError("--ray-address, --ray-retries and --fetch-captures go with --executor ray")
        if self.ray_retries is not None and self.ray_retries < 0:
            raise UsageError(f"--ray-retries {self.ray_retries}: 0 or more")

    def check_here(self, mode: str) -> None:
        """Points of a GPU mode run on this host need its GPU: without one, a NoGpuError (exit 3, one line) before the
        sweep's folder or first point, not the same failure at every point. Ray's points run on the cluster's GPUs;
        a mode that needs none (access) runs anywhere."""
        from kbench.modes import registry

        backend = registry.get(mode)
        if self.kind == "local" and registry.gpu_needed(backend):
            from kbench.capture import gpu

            gpu.require_cuda(f"kbench sweep --prof_type={mode}", torch=backend.in_process and not self.gpus)


def sweep(
    kernel: str | None = None,
    versions: Sequence[str] = (),
    values: dict[str, Any] | None = None,
    *,
    mode: str = "event",  # kbench.modes.registry.DEFAULT (not imported here: `import kbench` stays light)
    out_dir: Path | str | None = None,
    sweep_out: Path | str | None = None,
    bench_runs: int | None = None,
    kernel_path: Sequence[str] = (),
    resume: Path | str | None = None,
    executor: SweepExecutor | str = "local",
    progress: Callable[[str], None] | None = None,
    device: str | None = None,
) -> Swept:
    """``kbench sweep``: every version (all by default) of ``kernel`` at every combination of ``values`` (a list
    sweeps a parameter, a single value is fixed), each point an ordinary profile under ``out_dir``; the table, plots
    and bound-flip map under ``<sweep_out>/<kernel>/<timestamp>/`` (``resume``: an interrupted sweep's folder, whose
    missing points run under ``out_dir``, else under the root its sweep.json records where that lies below this
    folder). ``executor``: "local", "ray", or a ``SweepExecutor`` (GPU workers, Ray's address, retries
    and captures). ``device``: access mode's device to predict for (a conf/devices.json key)."""
    from kbench import sweep as sw
    from kbench import sweep_report

    how = executor if isinstance(executor, SweepExecutor) else SweepExecutor(executor)
    if resume is not None:
        spec = sw.resumed(Path(resume), None if out_dir is None else str(out_dir))
    else:
        if not kernel:
            raise UsageError("name a kernel package to sweep, e.g. sweep('mla_decode', ['v1', 'v2'], {'s': [1, 4]})")
        given = (values or {}).items()
        listed = {k: ",".join(map(str, v)) if isinstance(v, list | tuple) else str(v) for k, v in given}
        out = str(out_dir) if out_dir is not None else "out/profiles"
        spec = sw.ask(kernel, versions, listed, mode, out, bench_runs, list(kernel_path), device)
    how.check_here(spec["mode"])  # before a folder is made
    root = Path(sweep_out) if sweep_out is not None else Path("out/sweeps")
    folder = Path(resume) if resume is not None else sw.new_dir(root, spec["kernel"])
    rows = run_sweep(spec, folder, list(kernel_path), progress or logging.getLogger("kbench.sweep").info, how)
    return sw.Swept(folder, rows, sweep_report.write(rows, spec, folder))


def run_sweep(
    spec: dict[str, Any], folder: Path, kernel_path: list[str], progress: Callable[[str], None], how: SweepExecutor
) -> list[Row]:
    """A sweep's points run by the executor asked for; every row in grid order."""
    from kbench import sweep as sw
    from kbench.modes import registry

    registry.get(spec["mode"])
    if how.kind == "ray":
        from kbench import sweep_ray

        retries = sweep_ray.RETRIES if how.ray_retries is None else how.ray_retries
        return sweep_ray.run(spec, folder, kernel_path, progress, address=how.ray_address, retries=retries,
                             fetch_captures=how.fetch_captures)  # fmt: skip
    if how.gpus:
        return sw.run_workers(spec, folder, list(how.gpus), kernel_path)
    return sw.run(spec, folder, sw.profiler(spec, kernel_path, progress), progress)
