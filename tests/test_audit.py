"""The cross-tool audit: ncu's stage duration beside the CUDA-event median, and the likely cause of a gap."""

from __future__ import annotations

from kbench.analysis.audit import audit, cause
from kbench.analysis.counters import StageCounters


def counted(stage: str, us: float) -> StageCounters:
    none = dict.fromkeys(
        ["tc_pct", "sm_pct", "dram_pct", "occupancy_pct", "theoretical_occupancy_pct", "l2_hit_pct", "spill_bytes",
         "waves", "registers", "shared_bytes", "measured_flops", "tensor_flops", "measured_bytes", "replay_passes"]
    )  # fmt: skip
    return StageCounters(stage=stage, kernels=["k"], grids=["n/a"], duration_us=us, **none)


def test_rows_and_causes() -> None:
    rows = audit(
        [counted("add", 182.62), counted("tiny", 2.40), counted("mm", 216.74), counted("gone", 5.0)],
        {"add": [184.0, 184.4, 185.0], "tiny": [4.3, 4.32, 4.4], "mm": [180.0, 181.0, 182.0]},
    )
    assert [r.stage for r in rows] == ["add", "tiny", "mm"]  # a stage the events did not time is left out
    assert rows[0].cause is None and rows[0].line() == (
        "add: ncu 182.62 us, CUDA events 184.40 us in the same process (ncu / events 0.990)"
    )
    assert rows[1].cause is not None and rows[1].cause.startswith("on a short stage CUDA events add launch")
    assert rows[2].cause is not None and rows[2].cause.startswith("ncu's replay ran slower")
    assert "differs by more than 5%" in rows[2].line()


def test_a_long_stage_slower_by_events_points_at_the_clock() -> None:
    found = cause(210.0, 262.0)
    assert found is not None and "lower SM clock" in found
    assert cause(100.0, 104.0) is None
