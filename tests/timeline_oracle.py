"""The timeline analyses as kbench computed them before issue 41 (5c21b64: analysis/timeline.py and
analysis/timeline_stages.py), kept as the oracle the faster ones must agree with. Quadratic: every stage range
scanned the whole table, every occurrence every kernel, every idle gap every GPU row (a 2.6 MB trace ran past 200 s).

Changed from 5c21b64 in one respect only: where rows tie, they keep the table's order (stable sorts). The old code
sorted with pandas' default quicksort, which leaves ties in an order that depends on the array's length; the
analysis now defines the order, and this oracle states it.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from kbench.analysis import timeline_stages as ts
from kbench.analysis.timeline import GPU_KINDS
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import KbenchError
from kbench.nvtx import ITERATION, STAGE, alone_range, stage_range


def ranges(tl: pd.DataFrame, name: str) -> list[tuple[int, int]]:
    r = tl[(tl["kind"] == "nvtx") & (tl["name"] == name)]
    return list(zip(r["start_ns"].astype(int), r["end_ns"].astype(int), strict=True))


def launched_in(tl: pd.DataFrame, start: int, end: int) -> pd.DataFrame:
    api = tl[tl["kind"].isin(["runtime", "driver"]) & (tl["start_ns"] >= start) & (tl["start_ns"] <= end)]
    gpu = tl[tl["kind"].isin(GPU_KINDS)]
    return gpu[gpu["correlation"].isin(set(api["correlation"].dropna()))]


def union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def overlapped_fraction(start: int, end: int, others: Iterable[tuple[int, int]]) -> float:
    clipped = [(max(start, a), min(end, b)) for a, b in others if min(end, b) > max(start, a)]
    return sum(b - a for a, b in union(clipped)) / (end - start) if end > start else 0.0


def busy(tl: pd.DataFrame, start: int, end: int) -> dict[str, float]:
    gpu = tl[tl["kind"].isin(GPU_KINDS)]
    spans = [
        (max(start, int(a)), min(end, int(b)))
        for a, b in zip(gpu["start_ns"], gpu["end_ns"], strict=True)
        if min(end, int(b)) > max(start, int(a))
    ]
    busy_ns = sum(b - a for a, b in union(spans))
    kernel_spans = [
        (max(start, int(a)), min(end, int(b)))
        for a, b, kind in zip(gpu["start_ns"], gpu["end_ns"], gpu["kind"], strict=True)
        if kind == "kernel" and min(end, int(b)) > max(start, int(a))
    ]
    events = sorted([(a, 1) for a, _ in kernel_spans] + [(b, -1) for _, b in kernel_spans])
    running, last, concurrent = 0, start, 0
    for t, step in events:
        if running >= 2:
            concurrent += t - last
        running += step
        last = t
    return {
        "window_us": (end - start) / 1e3,
        "busy_us": busy_ns / 1e3,
        "idle_us": (end - start - busy_ns) / 1e3,
        "concurrent_us": concurrent / 1e3,
    }


def idle_gaps(tl: pd.DataFrame, start: int, end: int, top: int = 5) -> pd.DataFrame:
    gpu = tl[tl["kind"].isin(GPU_KINDS)].sort_values("end_ns", kind="stable")
    spans = union((int(a), int(b)) for a, b in zip(gpu["start_ns"], gpu["end_ns"], strict=True))
    rows = []
    prev_end = start
    for a, b in [*spans, (end, end)]:
        if a > prev_end and prev_end < end:
            gap_end = min(a, end)
            before = gpu[(gpu["end_ns"] <= prev_end) & (gpu["end_ns"] > start)]
            rows.append(
                {
                    "start_ns": prev_end,
                    "gap_us": (gap_end - prev_end) / 1e3,
                    "after": before.iloc[-1]["name"] if len(before) else "(window start: no GPU work yet)",
                }
            )
        prev_end = max(prev_end, b)
    df = pd.DataFrame(rows, columns=["start_ns", "gap_us", "after"])
    return df.sort_values("gap_us", ascending=False, kind="stable").head(top).reset_index(drop=True)


def _api_start(table: pd.DataFrame) -> dict[int, int]:
    api = table[table["kind"].isin(["runtime", "driver"])].dropna(subset=["correlation"])
    first = api.groupby("correlation")["start_ns"].min()
    return {int(c): int(s) for c, s in zip(first.index, first, strict=True)}


def _occurrence(
    kernels: pd.DataFrame,
    api_start: dict[int, int],
    stage: str,
    phase: str,
    iteration: int,
    rng: tuple[int, int] | None,
    work: pd.DataFrame,
) -> ts.Occurrence | None:
    if work.empty:
        return None
    own = work[work["kind"] == "kernel"].sort_values("start_ns", kind="stable")
    start, end = int(work["start_ns"].min()), int(work["end_ns"].max())
    spans = [(int(a), int(b)) for a, b in zip(own["start_ns"], own["end_ns"], strict=True)]
    near = kernels[(kernels["start_ns"] < end) & (kernels["end_ns"] > start) & ~kernels.index.isin(own.index)]
    others = [(int(a), int(b)) for a, b in zip(near["start_ns"], near["end_ns"], strict=True)]
    busy_ns = sum(b - a for a, b in union(spans))
    covered = sum(overlapped_fraction(a, b, others) * (b - a) for a, b in union(spans))
    latency = None
    if not own.empty:
        first = own.iloc[0]
        known = first["correlation"] == first["correlation"]
        call = api_start.get(int(first["correlation"])) if known and first["correlation"] is not None else None
        latency = (int(first["start_ns"]) - call) / 1e3 if call is not None else None
    return ts.Occurrence(
        stage=stage,
        phase=phase,
        iteration=iteration,
        range_start_ns=rng[0] if rng else None,
        range_us=(rng[1] - rng[0]) / 1e3 if rng else None,
        gpu_start_ns=start,
        gpu_end_ns=end,
        gpu_us=(end - start) / 1e3,
        kernel_us=float((own["end_ns"] - own["start_ns"]).sum()) / 1e3,
        kernels=[str(n) for n in own["name"]],
        streams=sorted({int(s) for s in own["stream"].dropna()}),
        launch_latency_us=latency,
        overlapped_pct=100.0 * covered / busy_ns if busy_ns else 0.0,
        rows=[int(i) for i in own.index],  # the table's positions (its index is 0..n-1)
    )


def _inside(point: int, rngs: Sequence[tuple[int, int]]) -> int | None:
    return next((i for i, (a, b) in enumerate(rngs) if a <= point <= b), None)


def occurrences(table: pd.DataFrame, stages: Sequence[str] | None = None) -> tuple[list[ts.Occurrence], str]:
    kernels = table[table["kind"] == "kernel"]
    api_start = _api_start(table)
    nvtx = table[table["kind"] == "nvtx"]
    iterations = ranges(table, ITERATION)
    marked = [str(n) for n in nvtx["name"].drop_duplicates() if str(n).startswith(STAGE)]
    names = list(stages) if stages is not None else [n[len(STAGE) :] for n in marked]
    out: list[ts.Occurrence] = []
    if names:
        for name in names:
            for phase, rngs in (
                ("together", ranges(table, stage_range(name))),
                ("alone", ranges(table, alone_range(name))),
            ):
                for k, (a, b) in enumerate(rngs):
                    it = _inside(a, iterations) if phase == "together" and iterations else k
                    if it is None:
                        continue
                    occ = _occurrence(kernels, api_start, name, phase, it, (a, b), launched_in(table, a, b))
                    if occ is not None:
                        out.append(occ)
        missing = [n for n in names if not any(o.stage == n and o.phase == "together" for o in out)]
        if missing:
            raise KbenchError(f"no GPU work was launched inside NVTX range(s) {', '.join(missing)}")
        return out, "NVTX ranges kbench.<stage>" + (f" inside {ITERATION}" if iterations else "")
    seen: Counter[str] = Counter()
    for idx, name in kernels["name"].items():
        occ = _occurrence(kernels, api_start, str(name), "together", seen[str(name)], None, kernels.loc[[idx]])
        seen[str(name)] += 1
        if occ is not None:
            out.append(occ)
    return out, "kernel names (the capture has no kbench.* NVTX ranges)"


def windows(table: pd.DataFrame, occs: Sequence[ts.Occurrence]) -> tuple[list[ts.Window], list[ts.Gap]]:
    together = [o for o in occs if o.phase == "together"]
    spans: list[tuple[int, int, int, int, int]] = []
    iterations = ranges(table, ITERATION)
    if iterations:
        for i, (a, b) in enumerate(iterations):
            mine = [o for o in together if o.iteration == i]
            if mine:
                g0, g1 = min(o.gpu_start_ns for o in mine), max(o.gpu_end_ns for o in mine)
                spans.append((i, a, g0, g1, max(g1, b)))
    else:
        starts = [o.range_start_ns if o.range_start_ns is not None else o.gpu_start_ns for o in together]
        g0, g1 = min(o.gpu_start_ns for o in together), max(o.gpu_end_ns for o in together)
        spans.append((0, min(starts), g0, g1, g1))
    out, gaps = [], []
    for i, w0, g0, g1, w1 in spans:
        use = busy(table, w0, w1)
        out.append(
            ts.Window(
                index=i,
                start_ns=w0,
                window_us=use["window_us"],
                span_us=(g1 - g0) / 1e3,
                busy_us=use["busy_us"],
                idle_us=use["idle_us"],
                concurrent_us=use["concurrent_us"],
            )
        )
        for _, g in idle_gaps(table, w0, w1, top=ts.TOP_GAPS).iterrows():
            gaps.append(
                ts.Gap(
                    window=i, at_us=(int(g["start_ns"]) - w0) / 1e3, gap_us=float(g["gap_us"]), after=str(g["after"])
                )
            )
    gaps.sort(key=lambda g: g.gap_us, reverse=True)
    return out, gaps[: ts.TOP_GAPS]


def stages(occs: Sequence[ts.Occurrence]) -> list[dict[str, Any]]:
    """analyze()'s per-stage figures, as 5c21b64 gathered them (a scan of every occurrence per stage)."""
    out = []
    for name in dict.fromkeys(o.stage for o in occs):
        mine = [o for o in occs if o.stage == name and o.phase == "together"]
        alone = [o.gpu_us for o in occs if o.stage == name and o.phase == "alone"]
        out.append(
            {
                "stage": name,
                "kernels": sorted({k for o in mine for k in o.kernels}),
                "occurrences": len(mine),
                "gpu": TimingStats.of([o.gpu_us for o in mine]).model_dump(),
                "kernel_us": statistics.median(o.kernel_us for o in mine),
                "alone": TimingStats.of(alone).model_dump() if alone else None,
                "overlapped_pct": statistics.median(o.overlapped_pct for o in mine),
            }
        )
    return out
