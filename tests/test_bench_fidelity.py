"""bench_fidelity's run-to-run table: stage durations read from real event-mode result.json files (the same figures
their report.md shows) and their spread over separate runs."""

from __future__ import annotations

import pytest

from tests.benchmark.bench_fidelity import spread, stage_durations
from tests.conftest import DATA

RUNS = DATA / "event_h100"


def test_stage_durations_are_the_reports_figures() -> None:
    assert stage_durations(RUNS / "matmul_base" / "result.json") == {"mm": pytest.approx(237.82, abs=0.005)}
    assert stage_durations(RUNS / "matmul_base_1024" / "result.json") == {"mm": pytest.approx(13.44, abs=0.005)}


def test_spread_over_runs_per_stage() -> None:
    big = stage_durations(RUNS / "matmul_base" / "result.json")
    small = stage_durations(RUNS / "matmul_base_1024" / "result.json")
    med, lo, hi = spread([big, small, big])["mm"]
    assert (med, lo, hi) == (big["mm"], small["mm"], big["mm"])
    assert spread([big, {"other": 1.0}]) == {}  # a stage some run lacks is left out
    assert spread([]) == {}
