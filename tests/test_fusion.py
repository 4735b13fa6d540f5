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
    # bytes: apart 1.2e9, fused 0.8e9 -> 33% saved (66.7 us); floor 0.8e9 B at 5000 GB/s = 160 us -> cap 40 us
    assert o is not None and abs(o.gain_pct - 20.0) < 1e-9


def test_what_does_not_group() -> None:
    tiling = {"a": flow(("x", 4e8, "r")), "b": flow(("x", 4e8, "r")), "c": flow(("z", 4e8, "r"))}
    # a compute-bound stage breaks the run; so does a stage that shares nothing with the one before
    assert fusion([fig("a", 100.0), fig("b", 100.0, "Compute")], tiling, 200.0, ROOF) is None
    assert fusion([fig("a", 100.0), fig("c", 100.0)], tiling, 200.0, ROOF) is None
    # no recorded data flow: nothing to say
    assert fusion([fig("a", 100.0), fig("b", 100.0)], {}, 200.0, ROOF) is None


def test_a_tensor_used_after_the_group_or_the_output_is_no_intermediate() -> None:
    figs = [fig("a", 400.0), fig("b", 400.0), fig("c", 100.0, "Compute")]
    tiling = {
        "a": flow(("x", 4e8, "r"), ("t", 4e8, "w")),
        "b": flow(("t", 4e8, "r"), ("x", 4e8, "r")),
        "c": flow(("t", 4e8, "r")),  # reads t later: it must still be written
    }
    o = fusion(figs, tiling, 900.0, ROOF)
    assert o is not None and o.name == (
        "Fuse stages a, b: x (400 MB) is read by 2 of them; t (400 MB) goes from one to the next through DRAM"
    )
