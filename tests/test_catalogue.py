"""Catalogue entries on made-up evidence, for the edges the H100/H200 pairs do not reach: when an entry must stay
silent, and its gain's cap."""

from __future__ import annotations

from typing import Any

from kbench.analysis import opportunities as op
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats

ROOF = Ceilings(tflops=50.0, gbps=4000.0, source="test")


def evidence(us: float, nbytes: float = 4e7, bottleneck: Any = "Memory", **kw: Any) -> op.Evidence:
    f = StageFigures(
        name="s",
        precision="fp32",
        flops=0.0,
        dram_bytes=nbytes,
        timing=TimingStats.of([us]),
        duration_us=us,
        tflops=None,
        gbps=None,
        intensity=0.0,
        bottleneck=bottleneck,
    )
    return op.Evidence(stage=f, total_us=us, practical=ROOF, **kw)


def test_launch_bound_needs_many_short_launches() -> None:
    # 64 launches of 5 us; the work at the roof takes 10 us: one launch would take 10 us
    found = op.launch_bound(evidence(320.0, launches=64))
    assert found is not None and found.name == "Launch-bound stage s: 64 kernel launches of 5.0 us each"
    assert abs(found.gain_pct - 100.0 * 310.0 / 320.0) < 1e-9
    assert op.launch_bound(evidence(12.0, launches=2)) is None  # a zeroed output and the kernel
    assert op.launch_bound(evidence(64 * 30.0, nbytes=4e9, launches=64)) is None  # 30 us launches: not short
    assert op.launch_bound(evidence(320.0, nbytes=1.1e9, launches=64)) is None  # the work takes most of the time


def test_uncoalesced_needs_wasted_sectors() -> None:
    assert op.uncoalesced(evidence(100.0, ld_sectors=1e6, ld_use=32.0, st_sectors=1e6, st_use=32.0)) is None
    assert op.uncoalesced(evidence(100.0, ld_sectors=1e6, ld_use=0.0)) is None  # no such loads (cp.async, TMA)
    found = op.uncoalesced(evidence(100.0, ld_sectors=8e6, ld_use=4.0, st_sectors=1e6, st_use=32.0))
    # sectors needed: 8e6 x 4/32 + 1e6 = 2e6 of 9e6: 77.8% of the time, above the 10 us roof time
    assert found is not None and found.metric == "s.global_ld_bytes_per_sector"
    assert abs(found.gain_pct - 100.0 * (1 - 2e6 / 9e6)) < 1e-9


def test_the_partial_wave_is_not_named_on_a_memory_bound_stage() -> None:
    kw: dict[str, Any] = {"sm_count": 132, "ctas": 144, "ctas_per_sm": 1.0, "ctas_limiter": "registers"}
    assert op.tail(evidence(1000.0, **kw)) is None
    found = op.tail(evidence(1000.0, bottleneck="Compute", **kw))
    assert found is not None and "(1 per SM, limited by registers, on 132 SMs)" in found.name


def test_an_item_whose_gain_rounds_to_zero_is_left_out_and_named_in_the_note() -> None:
    def item(name: str, gain: float, stop: bool = False) -> op.Opportunity:
        return op.Opportunity(name=name, gain_pct=gain, metric="m", value="v", named=True, stop=stop)

    stop, tiny, real = item("add: stop", 0.01, stop=True), item("Uncoalesced stores in add", 0.02), item("X", 4.0)
    found, note = op.rank([tiny, stop, None, real], fewer=lambda n: f"Only {n} listed.")
    assert found == [real, stop]  # the stop line stays whatever its gain
    assert note == "Only 2 listed. Left out, each under 0.05% of the plan's time: Uncoalesced stores in add."
    alone, alone_note = op.rank([tiny], fewer=lambda n: f"Only {n} listed.")
    assert alone == [tiny] and alone_note == "Only 1 listed."  # nothing else: the one item is kept
