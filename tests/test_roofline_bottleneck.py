"""Roofline arithmetic (contract section 5) and the classification table (sections 3-4), one test per row."""

from __future__ import annotations

import pytest

from kbench.analysis import bottleneck as b
from kbench.analysis import roofline as rl

H100_BF16 = rl.Ceilings(tflops=989.4, gbps=3350.0, source="test")


def test_ridge_and_roof() -> None:
    assert H100_BF16.ridge == pytest.approx(295.34, abs=0.01)
    assert rl.roof_tflops(H100_BF16, flops=100.0, dram_bytes=1.0) == pytest.approx(335.0)  # 100 FLOP/B * 3.35 TB/s
    assert rl.roof_tflops(H100_BF16, flops=1e6, dram_bytes=1.0) == 989.4
    assert rl.roof_tflops(H100_BF16, flops=5.0, dram_bytes=0.0) == 989.4


def test_bound_efficiency_and_limiting_roof() -> None:
    n = 1 << 26
    flops, nbytes = float(n), 12.0 * n  # fp32 vector add
    bound = rl.bound_us(H100_BF16, flops, nbytes)
    assert bound == pytest.approx(nbytes / 3350e9 * 1e6)
    assert rl.limiting_roof(H100_BF16, flops, nbytes) == "memory"
    assert rl.efficiency(H100_BF16, flops, nbytes, us=2 * bound) == pytest.approx(0.5)
    # efficiency is achieved over roof
    us = 2 * bound
    assert rl.efficiency(H100_BF16, flops, nbytes, us) == pytest.approx(
        rl.achieved_tflops(flops, us) / rl.roof_tflops(H100_BF16, flops, nbytes)
    )
    mm = 2.0 * 4096**3, 2.0 * 3 * 4096**2
    assert rl.limiting_roof(H100_BF16, *mm) == "compute"
    assert rl.bound_us(H100_BF16, *mm) == pytest.approx(mm[0] / 989.4e12 * 1e6)


@pytest.mark.parametrize(
    ("compute", "memory", "cls"),
    [
        (5.0, 90.0, "Memory"),  # DRAM% high, TC% low
        (73.0, 10.0, "Compute"),  # TC% high, DRAM% low
        (20.0, 30.0, "Latency"),  # both low
        (80.0, 60.0, "Compute"),  # both high: the one closer to its roof
        (55.0, 92.0, "Memory"),
        (b.HIGH_PCT, 0.0, "Compute"),  # the threshold itself counts as high
        (b.HIGH_PCT - 0.1, b.HIGH_PCT - 0.1, "Latency"),
    ],
)
def test_classification_table(compute: float, memory: float, cls: str) -> None:
    assert b.classify(compute, memory) == cls


@pytest.mark.parametrize(("l2_hit", "flag"), [(79.9, True), (80.0, False), (95.0, False), (None, False)])
def test_l2_hit_below_80_is_a_locality_flag(l2_hit: float | None, flag: bool) -> None:
    assert b.locality_issue(l2_hit) is flag


def test_plan_class_is_the_class_holding_most_time() -> None:
    assert b.plan_class([(41.2, "Compute"), (3.1, "Latency")]) == "Compute"
    assert b.plan_class([(10.0, "Memory"), (8.0, "Compute"), (7.0, "Compute")]) == "Compute"
    with pytest.raises(ValueError):
        b.plan_class([])


def test_health_thresholds_match_contract_section_3() -> None:
    assert (b.HEALTHY_TC_PCT, b.HEALTHY_DRAM_PCT, b.HEALTHY_OCCUPANCY_PCT) == (60.0, 70.0, 25.0)
    assert (b.HEALTHY_L2_HIT_PCT, b.HEALTHY_SPILL_BYTES, b.HEALTHY_WAVES) == (80.0, 0, 1.0)
