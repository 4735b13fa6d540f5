"""The timeline table and its analyses on real H100 captures of the same program by two backends
(tests/data/timeline_h100): Nsight Systems (SQLite) and the PyTorch profiler (Chrome trace)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kbench.analysis import timeline as tl
from kbench.analysis import timeline_stages as ts
from kbench.errors import ConfigError
from tests.conftest import DATA

CAPTURES = DATA / "timeline_h100"


@pytest.fixture(scope="module")
def nsys() -> pd.DataFrame:
    return tl.load(CAPTURES / "timeline.sqlite")


@pytest.fixture(scope="module")
def kineto() -> pd.DataFrame:
    return tl.load(CAPTURES / "kineto_trace.json")


def test_both_backends_give_the_same_table_shape(nsys: pd.DataFrame, kineto: pd.DataFrame) -> None:
    assert list(nsys.columns) == list(kineto.columns) == tl.COLUMNS
    assert (nsys["kind"] == "kernel").sum() == 35  # as the fixture README says
    assert sorted(nsys.loc[nsys["kind"] == "kernel", "stream"].unique()) == [7, 13, 17]
    assert {"kernel", "memcpy", "memset", "runtime", "nvtx"} <= set(nsys["kind"])
    assert {"kernel", "memcpy", "memset", "runtime", "driver"} <= set(kineto["kind"])
    for df in (nsys, kineto):
        assert (df["end_ns"] >= df["start_ns"]).all() and df["start_ns"].is_monotonic_increasing
    add = nsys[(nsys["kind"] == "kernel") & (nsys["name"] == "add_kernel")].iloc[0]
    assert add["grid"] == (65536, 1, 1) and add["block"] == (128, 1, 1) and add["registers"] == 26


def test_nvtx_ranges_and_the_kernels_they_launched(nsys: pd.DataFrame) -> None:
    streams = tl.ranges(nsys, "kbench.streams")
    assert len(streams) == 3 and len(tl.ranges(nsys, "kbench.add")) == 3
    for start, end in streams:
        launched = tl.launched_in(nsys, start, end)
        kernels = launched[launched["kind"] == "kernel"]
        assert list(kernels["name"].str[:10]) == ["add_kernel", "nvjet_sm90"]
        assert list(kernels["stream"]) == [13, 17]


def overlapped(df: pd.DataFrame, selected: pd.DataFrame) -> list[tuple[str, float]]:
    """Each selected kernel with the share of it that any other kernel overlapped (tl.overlapped_fraction)."""
    kernels = df[df["kind"] == "kernel"]
    out = []
    for idx, k in selected[selected["kind"] == "kernel"].iterrows():
        others = [
            (int(a), int(b))
            for i, a, b in zip(kernels.index, kernels["start_ns"], kernels["end_ns"], strict=True)
            if i != idx
        ]
        out.append((str(k["name"]), 100.0 * tl.overlapped_fraction(int(k["start_ns"]), int(k["end_ns"]), others)))
    return out


def _side_stream_overlap(df: pd.DataFrame, streams: tuple[int, int]) -> dict[str, list[float]]:
    rows = overlapped(df, df[(df["kind"] == "kernel") & df["stream"].isin(streams)])
    return {name[:10]: [pct for k, pct in rows if k[:10] == name[:10]] for name in ("add_kernel", "nvjet_sm90")}


def test_stream_overlap_of_kbench_streams_agrees_across_backends(nsys: pd.DataFrame, kineto: pd.DataFrame) -> None:
    # nsys: the kernels kbench.streams launched, after the first (warm-up) iteration; kineto has no NVTX ranges,
    # so the same kernels are those of its two side streams
    nsys_pct: dict[str, list[float]] = {"add_kernel": [], "nvjet_sm90": []}
    for start, end in tl.ranges(nsys, "kbench.streams")[1:]:
        for kernel, pct in overlapped(nsys, tl.launched_in(nsys, start, end)):
            nsys_pct[kernel[:10]].append(pct)
    kin = _side_stream_overlap(kineto, (21, 25))
    assert [round(v, 1) for v in nsys_pct["add_kernel"]] == [12.2, 12.6]
    assert [round(v, 1) for v in nsys_pct["nvjet_sm90"]] == [43.6, 37.9]
    assert [round(v, 1) for v in kin["add_kernel"]] == [10.2, 13.8]
    assert [round(v, 1) for v in kin["nvjet_sm90"]] == [38.4, 28.4]
    for name in ("add_kernel", "nvjet_sm90"):
        a, b = nsys_pct[name], kin[name]
        spread = (max(a) - min(a)) + (max(b) - min(b))  # capture-to-capture variation within each backend
        assert abs(sum(a) / len(a) - sum(b) / len(b)) <= spread, name


def test_busy_idle_and_gaps_inside_a_range(nsys: pd.DataFrame) -> None:
    start, end = tl.ranges(nsys, "kbench.streams")[1]
    b = tl.busy(nsys, start, end)
    assert b["busy_us"] + b["idle_us"] == pytest.approx(b["window_us"])
    assert 0 < b["concurrent_us"] < b["busy_us"]
    gaps = tl.idle_gaps(nsys, start, end)
    assert list(gaps["gap_us"]) == sorted(gaps["gap_us"], reverse=True)
    assert gaps["gap_us"].sum() <= b["idle_us"] + 1e-6 and set(gaps["after"]) <= set(nsys["name"]) | {
        "(window start: no GPU work yet)"
    }


def test_launch_latency_from_correlation_ids(nsys: pd.DataFrame, kineto: pd.DataFrame) -> None:
    occs, _ = ts.occurrences(kineto)  # no kbench ranges: every kernel launch is an occurrence
    assert len(occs) == (kineto["kind"] == "kernel").sum()
    assert all(o.launch_latency_us is not None and o.launch_latency_us > 0 for o in occs)
    occs, _ = ts.occurrences(nsys)  # kbench.add and kbench.streams ranges: from the launch call to the first kernel
    add = [o.launch_latency_us for o in occs if o.stage == "add"]
    assert len(add) == 3 and all(x is not None and 1 < x < 1000 for x in add)


def test_bad_captures_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such capture"):
        tl.load(tmp_path / "none.sqlite")
    bad = tmp_path / "trace.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="not a PyTorch-profiler Chrome trace"):
        tl.load(bad)
    with pytest.raises(ConfigError, match=r"nsys \.sqlite export or a PyTorch-profiler \.json"):
        tl.load(CAPTURES / "workloads.py")
