"""Proton (Triton's profiler, CUPTI backend) around a prepared plan, in this process: each stage's repetitions
timed with CUDA events outside a Proton session, then the same repetitions inside one, each in a scope named after
the stage carrying the plan's FLOPs and bytes (Proton derives TFLOP/s and GB/s from them). Writes
``<stem>.hatchet`` (Proton's profile) and returns the loops' times, for the overhead."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbench.capture.prepare import PreparedStage
from kbench.plan.base import Precision

# Proton's FLOP metrics carry the operand width in bits (flops8/16/32/64)
FLOP_BITS: dict[Precision, int] = {"fp8": 8, "int8": 8, "bf16": 16, "fp16": 16, "tf32": 32, "fp32": 32, "fp64": 64}


def metrics(ps: PreparedStage) -> dict[str, float]:
    """A stage's scope metrics: its model's FLOPs (under the width Proton expects) and DRAM bytes, when modelled."""
    s = ps.stage
    out: dict[str, float] = {}
    if s.flops is not None:
        out[f"flops{FLOP_BITS.get(s.precision, 32)}"] = float(s.flops)
    if s.dram_bytes is not None:
        out["bytes"] = float(s.dram_bytes)
    return out


def _loop_us(run: Callable[[], None]) -> float:
    """GPU time of ``run`` (every repetition back to back) with CUDA events, in microseconds."""
    import torch

    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) * 1e3


def _reload_inside_session(compiled: Any) -> None:
    """Make a Triton kernel load its module again at its next launch: Proton maps PC samples to source lines from
    the modules it sees loaded inside its session, and kbench loaded every kernel before (to tune and check it).
    A kernel without those handles (another Triton, a library call) is left alone: its samples stay per kernel."""
    if compiled is not None and getattr(compiled, "module", None) is not None and hasattr(compiled, "_run"):
        compiled.module = None
        compiled._run = None


def profile(stages: list[PreparedStage], reps: int, stem: Path, pc_sampling: bool = False) -> dict[str, Any]:
    """Run every stage ``reps`` times plain, then inside a Proton session (``stem``.hatchet); the loops' GPU times
    per stage: ``{"reps": n, "stages": {name: {"plain_us": ..., "profiled_us": ...}}}``. Each stage runs 2 x reps
    times in the session (the first loop untimed), so the profile holds 2 x reps launches per kernel."""
    import triton.profiler as proton

    def plain(ps: PreparedStage) -> Callable[[], None]:
        def run() -> None:
            for _ in range(reps):
                ps.launch.fn()

        return run

    def scoped(ps: PreparedStage) -> Callable[[], None]:
        values = metrics(ps)

        def run() -> None:
            for _ in range(reps):
                with proton.scope(ps.stage.name, values):
                    ps.launch.fn()

        return run

    times: dict[str, dict[str, float]] = {}
    for ps in stages:
        ps.launch.fn()  # loaded and warm before anything is timed
        times[ps.stage.name] = {"plain_us": _loop_us(plain(ps))}
    if pc_sampling:  # the session samples PCs: its kernels' times carry the sampling's cost (the overhead shows it)
        proton.start(str(stem), backend="cupti", mode="pcsampling", hook="triton")
        for ps in stages:
            _reload_inside_session(ps.compiled)
    else:
        proton.start(str(stem), backend="cupti", hook="triton")
    try:
        for ps in stages:
            scoped(ps)()  # the session's own start-up lands here (63 ms against 24 ms measured on an H100), untimed
            times[ps.stage.name]["profiled_us"] = _loop_us(scoped(ps))
    finally:
        proton.finalize()
    return {"reps": reps, "stages": times, "pc_sampling": pc_sampling}
