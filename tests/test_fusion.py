"""Fusion from the recorded data flow, on small made-up flows (the softmax pair in tests/test_diagnosis.py is the
real case): which consecutive stages group, what counts as an intermediate, and the gain's cap."""

from __future__ import annotations

from typing import Any

from kbench.analysis.bottleneck import StageClass
from kbench.analysis.fusion import fusion
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats

ROOF = {"fp32": Ceilings(tflops=50.0, gbps=4000.0, source="test")}


def fig(name: str, us: float, bottleneck: StageClass = "Memory") -> StageFigures:
    return StageFigures(
        name=name,
        precision="fp32",
        flops=None,
        dram_bytes=None,
        timing=TimingStats.of([us]),
        duration_us=us,
        tflops=None,
        gbps=None,
        intensity=None,
        bottleneck=bottleneck,
    )


def flow(*uses: tuple[str, float, str]) -> dict[str, Any]:
    """uses: (tensor, bytes, "r" / "w" / "wo" (written, the plan's output))."""
    return {
        "dataflow": {
            "kernels": 1,
            "tensors": [
                {"name": t, "bytes": b, "read": k == "r", "written": k.startswith("w"), "output": k == "wo"}
                for t, b, k in uses
            ],
        }
    }


def test_two_passes_over_one_input_with_an_intermediate() -> None:
    figs = [fig("a", 400.0), fig("b", 400.0)]
    tiling = {"a": flow(("x", 4e8, "r"), ("t", 4e8, "w")), "b": flow(("t", 4e8, "r"), ("y", 4e8, "wo"))}
    o = fusion(figs, tiling, 800.0, ROOF)
    assert o is not None and o.named
    # apart 1.6e9 bytes, fused 0.8e9 (t never leaves the chip): half of 800 us, above the roof's floor of 200 us
    assert o.name == "Fuse stages a, b: t only passes between them" and o.value == "2.00x"
    assert abs(o.gain_pct - 50.0) < 1e-9


def test_the_gain_stops_at_the_fused_bytes_on_the_practical_roof() -> None:
    figs = [fig("a", 100.0), fig("b", 100.0)]
    tiling = {"a": flow(("x", 4e8, "r")), "b": flow(("x", 4e8, "r"), ("y", 4e8, "wo"))}
    o = fusion(figs, tiling, 200.0, {"fp32": Ceilings(tflops=50.0, gbps=5000.0, source="t")})
    # b re-reads x: half of b's bytes (50 us), but b's other 4e8 B need 80 us at 5000 GB/s: b saves 20 us of 200
    assert o is not None and abs(o.gain_pct - 10.0) < 1e-9


def test_what_does_not_group() -> None:
    tiling = {"a": flow(("x", 4e8, "r")), "b": flow(("x", 4e8, "r")), "c": flow(("z", 4e8, "r"))}
    # a compute-bound stage breaks the run; so does a stage that shares nothing with the one before
    assert fusion([fig("a", 100.0), fig("b", 100.0, "Compute")], tiling, 200.0, ROOF) is None
    assert fusion([fig("a", 100.0), fig("c", 100.0)], tiling, 200.0, ROOF) is None
    # no recorded data flow: nothing to say
    assert fusion([fig("a", 100.0), fig("b", 100.0)], {}, 200.0, ROOF) is None


def test_a_tensor_used_after_the_group_or_the_output_is_no_intermediate() -> None:
    # d (no recorded data flow) ends the group; c reads t after it, so t must still be written
    figs = [fig("a", 400.0), fig("b", 400.0), fig("d", 10.0), fig("c", 100.0)]
    tiling = {
        "a": flow(("x", 4e8, "r"), ("t", 4e8, "w")),
        "b": flow(("t", 4e8, "r"), ("x", 4e8, "r")),
        "c": flow(("t", 4e8, "r")),
    }
    o = fusion(figs, tiling, 910.0, ROOF)
    assert o is not None and o.name == (
        "Fuse stages a, b: x (400 MB) is read by 2 of them; t (400 MB) goes from one to the next through DRAM"
    )


def test_a_gemm_and_its_epilogue_are_credited_with_the_epilogue_only() -> None:
    # the GEMM is compute-bound: fusing saves it nothing; the epilogue no longer reads c (half its bytes)
    figs = [fig("mm", 500.0, "Compute"), fig("bias", 100.0)]
    tiling = {
        "mm": flow(("a", 3.4e7, "r"), ("b", 3.4e7, "r"), ("c", 3.4e7, "w")),
        "bias": flow(("c", 3.4e7, "r"), ("out", 3.4e7, "wo")),
    }
    o = fusion(figs, tiling, 600.0, ROOF)
    assert o is not None and o.name == "Fuse stages mm, bias: c only passes between them"
    assert abs(o.gain_pct - 100.0 * 50.0 / 600.0) < 1e-9
