"""The timeline analyses at scale (issue 41): a 2.6 MB PyTorch trace ran past 200 s because every occurrence scanned
every kernel and every idle gap every GPU row. They now index the table once; these tests hold them to the
quadratic implementation they replaced (tests/timeline_oracle.py) on every real capture and on generated tables,
time them on a trace of that size, and count the lines they execute as the trace grows."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbench.analysis import timeline as tl
from kbench.analysis import timeline_index, timing_stats
from kbench.analysis import timeline_stages as ts
from kbench.errors import KbenchError
from kbench.nvtx import ITERATION, alone_range, stage_range
from tests import timeline_oracle as oracle
from tests.conftest import DATA
from tests.work_counter import lines_run


def _is_timeline(p: Path) -> bool:
    return p.suffix == ".sqlite" or (p.suffix == ".json" and b'"traceEvents"' in p.read_bytes()[:4096])


CAPTURES = sorted(p for p in DATA.rglob("*") if p.suffix in (".sqlite", ".json") and _is_timeline(p))
FORK_JOIN = [ts.StageSpec("mm", 1), ts.StageSpec("rowsum", 2), ts.StageSpec("combine", 0, ("mm", "rowsum"))]


def _same(table: pd.DataFrame, stages: list[str] | None) -> None:
    """The analysis of ``table`` is the oracle's: every occurrence, window, gap and stage figure, bit for bit."""
    try:
        want, how = oracle.occurrences(table, stages)
    except KbenchError:
        with pytest.raises(KbenchError):
            ts.occurrences(table, stages)
        return
    got, got_how = ts.occurrences(table, stages)
    assert (got, got_how) == (want, how)  # to the last bit of every float
    if not any(o.phase == "together" for o in want):
        return
    assert ts.windows(table, got) == oracle.windows(table, want)
    specs = [ts.StageSpec(s) for s in stages] if stages is not None else None
    analysis = ts.analyze(table, "test", "test", specs)
    assert [{k: s.model_dump()[k] for k in e} for s, e in zip(analysis.stages, oracle.stages(want), strict=True)] == (
        oracle.stages(want)
    )


@pytest.mark.slow
@pytest.mark.parametrize("capture", CAPTURES, ids=[str(p.relative_to(DATA)) for p in CAPTURES])
def test_every_real_timeline_is_analysed_as_before(capture: Path) -> None:
    table = tl.load(capture)
    _same(table, None)
    if capture.parent.name == "kbench_h100":
        _same(table, [s.name for s in FORK_JOIN])


# generated tables: small integer times so that starts, ends and whole spans tie and touch
TIME = st.integers(0, 60)
NAMES = ["a", "b", "c"]


@st.composite
def tables(draw: st.DrawFn) -> tuple[pd.DataFrame, list[str] | None]:
    rows: list[dict[str, Any]] = []
    for corr in range(1, draw(st.integers(1, 25)) + 1):
        kind = draw(st.sampled_from(["kernel", "kernel", "kernel", "memcpy", "memset"]))
        launch, start, dur = draw(TIME), draw(TIME), draw(st.integers(0, 15))
        traced = draw(st.booleans()) or kind != "kernel"
        api = draw(st.sampled_from(["runtime", "driver"]))
        rows.append({"kind": api, "name": "launch", "correlation": corr, "pid": 1, "tid": 1, "start_ns": launch,
                     "end_ns": launch + 1})  # fmt: skip
        rows.append({"kind": kind, "name": draw(st.sampled_from(["k1", "k2", "k3", "k4"])),
                     "stream": draw(st.integers(1, 3)), "device": 0, "correlation": corr if traced else None,
                     "start_ns": start, "end_ns": start + dur})  # fmt: skip
    ranged = draw(st.booleans())
    stages = None
    if ranged:
        stages = draw(st.one_of(st.none(), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True)))
        for _ in range(draw(st.integers(0, 3))):
            a = draw(TIME)
            rows.append({"kind": "nvtx", "name": ITERATION, "start_ns": a, "end_ns": a + draw(st.integers(0, 40))})
        for _ in range(draw(st.integers(1, 8))):
            a, name = draw(TIME), draw(st.sampled_from(NAMES))
            label = draw(st.sampled_from([stage_range(name), alone_range(name)]))
            rows.append({"kind": "nvtx", "name": label, "start_ns": a, "end_ns": a + draw(st.integers(0, 30))})
    return tl._frame(rows), stages


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_generated_timelines_are_analysed_as_before(case: tuple[pd.DataFrame, list[str] | None]) -> None:
    table, stages = case
    _same(table, stages)


def trace(kernels: int, seed: int = 0) -> dict[str, Any]:
    """A PyTorch-profiler trace of ``kernels`` launches with no NVTX ranges (each kernel name a stage, each launch an
    occurrence), on four streams: short kernels with idle gaps between them on three, and on the fourth long ones,
    each overlapping every kernel launched after it."""
    rnd = random.Random(seed)
    events: list[dict[str, Any]] = []
    t = 1000.0
    for i in range(kernels):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t,
                       "dur": 2.0, "args": {"correlation": i + 1}})  # fmt: skip
        stream = 7 + i % 4
        dur = 1e9 if stream == 10 else rnd.uniform(1, 30)
        events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{i}", "pid": 0, "tid": stream,
                       "ts": t + rnd.uniform(1, 5), "dur": dur, "args": {"device": 0, "stream": stream,
                       "correlation": i + 1, "grid": [64, 1, 1], "block": [128, 1, 1]}})  # fmt: skip
        t += rnd.uniform(0.5, 12)
    return {"traceEvents": events}


@pytest.mark.slow
def test_a_trace_of_the_reviews_size_is_analysed_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(trace(8000)))
    assert path.stat().st_size > 2_600_000
    started = time.perf_counter()
    analysis = ts.analyze(tl.load(path), "PyTorch profiler (CUPTI)", path.name)
    elapsed = time.perf_counter() - started
    assert len(analysis.occurrences) == 8000 and len(analysis.stages) == 8000
    assert elapsed < 30, f"{elapsed:.1f} s"  # the quadratic analysis took minutes on this trace


def _lines(kernels: int, analysis: Callable[[pd.DataFrame], object], modules: tuple[ModuleType, ...]) -> int:
    """The lines of Python ``analysis`` executes in ``modules`` on ``trace(kernels)``: work counted, the same on a
    quiet machine and a busy one (the wall clock of a shared CI machine failed this check under load)."""
    table = tl._frame(r for e in trace(kernels)["traceEvents"] if (r := tl._kineto_row(e)) is not None)
    return lines_run(lambda: analysis(table), modules)[1]


@pytest.mark.slow
def test_the_analysis_grows_in_proportion_to_the_trace() -> None:
    def analysis(table: pd.DataFrame) -> object:
        return ts.analyze(table, "test", "test")

    small, large = (_lines(n, analysis, (timeline_index, ts, timing_stats)) for n in (1_000, 8_000))
    assert large <= 8 * small * 1.1, (small, large)  # 8 times the trace: 8 times the work (64 if quadratic)


@pytest.mark.slow
def test_the_count_sees_the_quadratic_analysis_it_replaced() -> None:
    # the same count on the oracle (every occurrence scanned every kernel): 4 times the trace, well over 8 times
    # the work, so the check above can fail
    small, large = (_lines(n, lambda t: oracle.occurrences(t, None), (oracle,)) for n in (125, 500))
    assert large > 4 * small * 2, (small, large)
