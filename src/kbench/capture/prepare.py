"""Turn a plan into ready-to-time launches: workspace, autotuning (through the cache), correctness check.

All allocation, compilation and tuning happen here, outside any timed region.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench.analysis.devices import ActiveDevice
from kbench.capture import triton_autotune
from kbench.capture.timing import time_candidates
from kbench.errors import KernelError, UsageError, first_line
from kbench.plan import autotune
from kbench.plan.base import Config, KernelPlan, Launch, Stage

log = logging.getLogger(__name__)


@dataclass
class Launched:
    """One Triton kernel (by name) a stage's launch ran: the compiled kernel, the grid Triton launched it with
    (None: not told) and how many times one run of the stage launched it."""

    compiled: Any
    grid: list[int] | None
    launches: int = 1


@dataclass
class PreparedStage:
    stage: Stage
    config: Config
    launch: Launch
    tune: autotune.TuneResult
    compiled: Any = None  # Triton's CompiledKernel from the first launch; None for library calls
    flow: dict[str, Any] | None = None  # what it read and wrote (capture.dataflow), on a GPU
    # every Triton kernel the launch ran, by name: its CompiledKernel, the grid of its first launch, its launches
    launched: dict[str, Launched] = field(default_factory=dict)
    # what its kernels that tune themselves (@triton.autotune) chose, by how much (capture.triton_autotune.record)
    self_tuned: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    rel_err: float
    tolerance: float
    where: str  # "cuda" or "cpu (Triton interpreter)"
    dtype: str
    note: str = ""
    out_of_bounds: str = ""  # under the interpreter: the first site that reached outside its tensor ("": none)
    compiled: str = ""  # under the interpreter: Gluon kernels compiled for sm_90, not run (kbench.capture.gluon)

    def verdict(self) -> str:
        if self.compiled:
            return f"COMPILED, NOT RUN: {self.compiled}"
        if self.out_of_bounds:
            return f"FAIL: out of bounds: {self.out_of_bounds}"
        return (
            f"{'PASS' if self.passed else 'FAIL'}: relative L2 error {self.rel_err:.3g} (tolerance {self.tolerance:g})"
        )

    def line(self) -> str:
        return f"{self.verdict()}, {self.dtype}, on {self.where}{'; ' + self.note if self.note else ''}"


@dataclass
class Prepared:
    plan: KernelPlan
    device: str
    ws: Any
    stages: list[PreparedStage] = field(default_factory=list)
    check: CheckResult | None = None
    _side_streams: dict[int, Any] | None = None  # stream number -> torch.cuda.Stream, made on first use

    def run_all(self, around: Callable[[str], AbstractContextManager[object]] | None = None) -> None:
        """Every stage once in declared order; on a GPU each on its declared stream, ordered by its ``after``
        stages with CUDA events, and the caller's stream joined with every side stream at the end.
        ``around(stage_name)`` wraps each launch (the timeline's NVTX ranges)."""
        wrap = around or (lambda _: nullcontext())
        if self.device != "cuda" or all(s.stage.stream == 0 for s in self.stages):
            for s in self.stages:
                with wrap(s.stage.name):
                    guarded(s.stage.name, s.launch.fn)
            return
        import torch

        caller = torch.cuda.current_stream()
        if self._side_streams is None:
            self._side_streams = {n: torch.cuda.Stream() for n in sorted({s.stage.stream for s in self.stages}) if n}
        begin = caller.record_event()
        for side in self._side_streams.values():
            side.wait_event(begin)  # nothing of this run starts before the caller's earlier work
        done: dict[str, Any] = {}
        for s in self.stages:
            stream = caller if s.stage.stream == 0 else self._side_streams[s.stage.stream]
            for dep in s.stage.after:
                stream.wait_event(done[dep])
            with torch.cuda.stream(stream), wrap(s.stage.name):
                guarded(s.stage.name, s.launch.fn)
            done[s.stage.name] = stream.record_event()
        for side in self._side_streams.values():
            caller.wait_stream(side)


def built(plan: KernelPlan, stage: Stage, ws: Any, cfg: Config, profiler_buffer: Any = None) -> Launch:
    """The stage's launch for ``cfg`` (recording its tasks into ``profiler_buffer`` when one is given: its
    ``build_intra``); a build that raises or returns no Launch is the plan's fault."""
    try:
        if profiler_buffer is not None and stage.build_intra is not None:
            launch = stage.build_intra(ws, cfg, profiler_buffer)
        else:
            launch = stage.build(ws, cfg)
    except Exception as e:
        raise UsageError(
            f"{plan.package} {plan.version}: stage {stage.name}: build() raised {type(e).__name__}: {first_line(e)}"
        ) from e
    if not isinstance(launch, Launch):
        raise UsageError(
            f"{plan.package} {plan.version}: stage {stage.name}: build() returned {type(launch).__name__}, not a Launch"
        )
    return launch


def guarded(stage: str, fn: Callable[[], Any]) -> Any:
    """Run a kernel call; a crash becomes one KernelError line naming the stage."""
    try:
        return fn()
    except KernelError:
        raise
    except Exception as e:
        raise KernelError(f"stage {stage} failed: {type(e).__name__}: {first_line(e)}") from e


def relative_l2(out: Any, ref: Any) -> float:
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        raise KernelError(f"output shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}")
    o, r = out.double(), ref.double()
    if not bool(torch.isfinite(o).all()):
        return math.inf
    denom = float(torch.linalg.vector_norm(r))
    return float(torch.linalg.vector_norm(o - r)) / (denom if denom > 0 else 1.0)


def _tensor(plan: KernelPlan, method: str, value: Any) -> Any:
    """``value`` when it is a tensor; else the plan is at fault (one UsageError line)."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise UsageError(f"{plan.package} {plan.version}: {method}() returned {type(value).__name__}, not a tensor")
    return value


def check(prep: Prepared, where: str, note: str = "") -> CheckResult:
    """Poison the output, run every stage once, compare with the plan's reference."""
    import torch

    out = _tensor(prep.plan, "output", guarded("output", lambda: prep.plan.output(prep.ws)))
    if out.is_floating_point():
        out.fill_(math.nan)
    prep.run_all()  # on the plan's streams, so a missing dependency shows up as a wrong result
    if prep.device == "cuda":
        guarded("(synchronize)", torch.cuda.synchronize)
    err = relative_l2(out, _tensor(prep.plan, "reference", guarded("reference", lambda: prep.plan.reference(prep.ws))))
    tol = prep.plan.rtol()
    return CheckResult(passed=err <= tol, rel_err=err, tolerance=tol, where=where, dtype=prep.plan.dtype, note=note)


# Times callables together (interleaved, kbench.capture.timing.time_candidates): each one's samples in microseconds.
TimeMany = Callable[[Sequence[Callable[[], object]]], list[list[float]]]


def measured(plan: KernelPlan, stage: Stage, ws: Any, time_many: TimeMany) -> autotune.Measure:
    """The autotuner's measure for ``stage``: each config's launch built and run once (one that does not compile or
    run is no candidate: None, said in a log line), then all that ran timed together by ``time_many``."""

    def measure(configs: Sequence[Config]) -> list[list[float] | None]:
        fns: list[Callable[[], object] | None] = []
        for cfg in configs:
            launch = built(plan, stage, ws, cfg)  # a build that raises is the plan's fault, not the config's
            try:
                launch.fn()  # compiled and run once before any candidate is timed
                fns.append(launch.fn)
            except Exception as e:
                log.warning("stage %s: config %s failed during tuning (%s); skipped", stage.name, cfg, first_line(e))
                fns.append(None)
        ran = [fn for fn in fns if fn is not None]
        timed = iter(time_many(ran) if ran else [])
        return [next(timed) if fn is not None else None for fn in fns]

    return measure


def prepare(
    plan: KernelPlan,
    device: str,
    *,
    seed: int,
    time_many: TimeMany | None = None,
    cache_dir: Callable[[Stage], Any] | None = None,
    toolchain: str = "",
    source: str = "",
) -> Prepared:
    """Allocate, tune every stage (``time_many`` times its candidates together; None = first config) and warm up
    once; a cached tuning counts for the same ``toolchain`` and ``source`` (the digest of the version's source)
    only."""
    ws = guarded("setup", lambda: plan.setup(device, seed))
    prep = Prepared(plan=plan, device=device, ws=ws)
    output = _tensor(plan, "output", guarded("output", lambda: plan.output(ws))) if device == "cuda" else None
    for stage in plan.checked_stages():
        # a kernel that tunes itself (@triton.autotune) does so on its first launch: with kbench's timer, recorded
        watch: AbstractContextManager[list[dict[str, Any]]] = (
            triton_autotune.watched() if device == "cuda" else nullcontext([])
        )
        with watch as self_tuned:
            flow = data_flow(plan, stage, ws, output) if device == "cuda" else None
            if time_many is None:
                tune = autotune.TuneResult(best=dict(stage.tuning[0]), history=[], source="fixed", path=None)
            else:
                path = cache_dir(stage) if cache_dir is not None else None
                try:
                    tune = autotune.tune(stage.tuning, measured(plan, stage, ws, time_many), path, toolchain, source)
                except autotune.TuningFailed as e:
                    raise KernelError(f"stage {stage.name}: {e}") from None
            launch = built(plan, stage, ws, tune.best)
            ran: dict[str, Launched] = {}
            if device == "cuda":
                compiled, ran = launched_kernel(stage.name, launch)
            else:
                compiled = guarded(stage.name, launch.fn)
        kernel = compiled if hasattr(compiled, "asm") else None
        prep.stages.append(PreparedStage(stage, tune.best, launch, tune, kernel, flow, ran, list(self_tuned)))
    return prep


def launched_kernel(stage: str, launch: Launch) -> tuple[Any, dict[str, Launched]]:
    """Run the launch once; the Triton kernel it returned, or else the last one it launched (a launch that zeroes
    an output first returns nothing), for the tiling record's top-level facts; and every Triton kernel it launched,
    by name, with its launch grid (tiling ``compiled_kernels``)."""
    from kbench.capture import dataflow

    with dataflow.watching(ops=False) as seen:
        result = guarded(stage, launch.fn)
    return (result if hasattr(result, "asm") or not seen.compiled else seen.compiled[-1]), by_name(
        seen.compiled, seen.grids
    )


def by_name(compiled: list[Any], grids: list[list[int] | None]) -> dict[str, Launched]:
    """Launched kernels deduplicated by name, in launch order: the first launch's kernel and grid, all launches
    counted."""
    out: dict[str, Launched] = {}
    for kernel, grid in zip(compiled, grids, strict=True):
        name = str(getattr(kernel.metadata, "name", "") or getattr(kernel, "name", "kernel"))
        if name in out:
            out[name].launches += 1
        else:
            out[name] = Launched(kernel, grid)
    return out


def data_flow(plan: KernelPlan, stage: Stage, ws: Any, output: Any) -> dict[str, Any] | None:
    """What the stage reads and writes: declared, or watched on its first launch (its first tuning config, before
    any other run of it, so its outputs still change); None, with a warning, when that launch fails (tuning then
    says why)."""
    from kbench.capture import dataflow

    if stage.reads or stage.writes:
        try:
            return dataflow.declared(stage.reads, stage.writes, ws, output)
        except UsageError as e:
            raise UsageError(f"{plan.package} {plan.version}: stage {stage.name}: {e}") from None
    launch = built(plan, stage, ws, dict(stage.tuning[0]))
    try:
        return dataflow.record(launch.fn, ws, output)[1]
    except Exception as e:
        log.warning("stage %s: its data flow was not recorded (%s)", stage.name, first_line(e))
        return None


def prepare_on_gpu(plan: KernelPlan, device: ActiveDevice, seed: int) -> Prepared:
    """Allocate, autotune (through the on-disk cache) and compile every stage on the current GPU."""
    import torch
    import triton

    from kbench.plan.sources import record

    toolchain = f"triton {triton.__version__}, torch {torch.__version__}"
    cache = autotune.cache_root()
    ran = record(type(plan).__module__)

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
        source=ran["digest"] if ran else "",
        time_many=time_candidates,
    )


def checked(prep: Prepared) -> CheckResult:
    """The correctness check on the GPU; a failure is a KernelError, and a fast but wrong autotuned config is
    dropped from the cache so it does not stay "the best"."""
    prep.check = check(prep, "cuda")
    if not prep.check.passed:
        dropped = [ps.stage.name for ps in prep.stages if ps.tune.source != "fixed" and autotune.forget(ps.tune.path)]
        hint = f" (dropped the autotune cache entry of {', '.join(dropped)})" if dropped else ""
        raise KernelError(
            f"correctness check failed: {prep.check.line()}{hint}; `kbench check {prep.plan.package} "
            f"{prep.plan.version}` checks every tuning config, or rerun with --no-check"
        )
    return prep.check
