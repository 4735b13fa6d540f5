"""A timeline table as a Chrome trace (JSON), which Perfetto (ui.perfetto.dev) and chrome://tracing open:
GPU work on one track per device and stream, API calls and NVTX ranges on one track per thread, and an arrow
from each launch call to the work it launched (same correlation id)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kbench.analysis.timeline import GPU_KINDS

if TYPE_CHECKING:
    import pandas as pd

ARGS = ("correlation", "grid", "block", "registers", "shared_bytes")


def _known(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _id(v: Any) -> str:
    return str(int(v)) if _known(v) else "?"


def chrome_trace(table: pd.DataFrame) -> dict[str, Any]:
    """Complete ('X') events in microseconds from the table's first timestamp; flow events for launches."""
    t0 = int(table["start_ns"].min()) if len(table) else 0
    events: list[dict[str, Any]] = []
    launches: dict[int, tuple[str, str, float]] = {}
    for row in table.to_dict("records"):
        gpu = row["kind"] in GPU_KINDS
        pid = f"GPU {_id(row['device'])}" if gpu else f"process {_id(row['pid'])}"
        tid = f"stream {_id(row['stream'])}" if gpu else f"thread {_id(row['tid'])}"
        ts = (int(row["start_ns"]) - t0) / 1e3
        args = {k: list(row[k]) if isinstance(row[k], tuple) else row[k] for k in ARGS if _known(row[k])}
        events.append(
            {
                "name": str(row["name"]),
                "cat": str(row["kind"]),
                "ph": "X",
                "ts": ts,
                "dur": (int(row["end_ns"]) - int(row["start_ns"])) / 1e3,
                "pid": pid,
                "tid": tid,
                "args": args,
            }
        )
        if not _known(row["correlation"]):
            continue
        corr = int(row["correlation"])
        if row["kind"] in ("runtime", "driver"):
            launches.setdefault(corr, (pid, tid, ts))
        elif gpu and corr in launches:
            lpid, ltid, lts = launches[corr]
            events.append({"name": "launch", "cat": "flow", "ph": "s", "id": corr, "ts": lts, "pid": lpid, "tid": ltid})
            events.append(
                {"name": "launch", "cat": "flow", "ph": "f", "bp": "e", "id": corr, "ts": ts, "pid": pid, "tid": tid}
            )
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"t0_ns": t0, "written_by": "kbench"}}
