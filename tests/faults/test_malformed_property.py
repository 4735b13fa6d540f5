"""Malformed timeline captures, generated (hypothesis): `kbench analyze` of a PyTorch-profiler trace whose events
have missing, wrong-typed or absurd fields, or an nsys SQLite export missing tables, ends in a report or in one
KbenchError (one line, a documented exit code), never in another exception (exit 70)."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbench import pipeline
from kbench.errors import KbenchError
from tests.conftest import DATA

ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(0, 4), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
KINDS = ["kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "user_annotation"]
NUMBER = st.one_of(st.integers(0, 10**9), st.floats(0, 1e9, allow_nan=False), ODD)
EVENT = st.fixed_dictionaries(
    {},
    optional={
        "cat": st.one_of(
            st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "user_annotation"]), ODD
        ),
        "ph": st.one_of(st.just("X"), ODD),
        "name": st.one_of(st.sampled_from(["kbench.add", "k", ""]), ODD),
        "ts": NUMBER,
        "dur": NUMBER,
        "pid": ODD,
        "tid": ODD,
        "args": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "device": ODD,
                    "stream": ODD,
                    "correlation": st.one_of(st.integers(0, 5), ODD),
                    "grid": ODD,
                    "block": ODD,
                    "registers per thread": ODD,
                    "shared memory": ODD,
                },
            ),
            ODD,
        ),
    },
)
# events the parser accepts (a known kind, "X", numeric times) with everything else odd: they reach the analysis
PLAUSIBLE = st.fixed_dictionaries(
    {
        "cat": st.sampled_from(KINDS),
        "ph": st.just("X"),
        "ts": st.floats(0, 1e7, allow_nan=False),
        "dur": st.floats(0, 1e4, allow_nan=False),
    },
    optional={
        "name": st.one_of(st.sampled_from(["kbench.add", "kbench.", "k", ""]), ODD),
        "pid": ODD,
        "tid": ODD,
        "args": st.fixed_dictionaries(
            {},
            optional={"device": ODD, "stream": ODD, "correlation": st.one_of(st.integers(0, 5), ODD), "grid": ODD},
        ),
    },
)
REAL = json.loads((DATA / "timeline_h100" / "kineto_trace.json").read_text())


def _analyze(path: Path) -> None:
    with tempfile.TemporaryDirectory() as out:
        try:
            pipeline.analyze(path, None, Path(out), None)
        except KbenchError as e:
            assert str(e).strip() and "\n" not in str(e).strip()


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(st.one_of(EVENT, PLAUSIBLE), max_size=8), keep=st.integers(0, 40))
def test_a_trace_with_odd_events_is_a_report_or_one_kbench_error(events: list[dict[str, Any]], keep: int) -> None:
    # real events (some of them) with generated ones among them
    trace = {**REAL, "traceEvents": REAL["traceEvents"][:keep] + events}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        path.write_text(json.dumps(trace))
        _analyze(path)


@settings(max_examples=25, deadline=None)
@given(top=st.one_of(ODD, st.fixed_dictionaries({"traceEvents": ODD})))
def test_a_trace_of_the_wrong_shape_is_one_kbench_error(top: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        path.write_text(json.dumps(top))
        _analyze(path)


TABLES = ["CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"]


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(drop=st.sets(st.sampled_from(TABLES), min_size=1))
def test_an_nsys_export_missing_tables_is_one_kbench_error(drop: set[str]) -> None:
    source = DATA / "kbench_h100" / "nsys_fork_join.sqlite"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "timeline.sqlite"
        path.write_bytes(source.read_bytes())
        db = sqlite3.connect(path)
        for table in drop:
            db.execute(f"DROP TABLE IF EXISTS {table}")
        db.commit()
        db.close()
        _analyze(path)
