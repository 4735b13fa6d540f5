"""A GPU timeline from Nsight Systems (SQLite export) or the PyTorch profiler (Chrome trace JSON) as one
normalized table, and the analyses on it: which kernels a range launched, overlap across streams, busy and
idle time, launch latency. Pure: a file in, tables out.

Columns: kind (kernel, memcpy, memset, runtime, driver, nvtx), name, device, stream, correlation, pid, tid,
start_ns, end_ns, grid, block, registers, shared_bytes (None where the source does not say).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbench import inputs
from kbench.analysis.timeline_index import GPU_KINDS as GPU_KINDS  # where report.trace and the tests look for it
from kbench.analysis.timeline_index import Index, covered
from kbench.errors import ConfigError

if TYPE_CHECKING:  # pandas is imported where a frame is built: analysis without a timeline never loads it
    import pandas as pd

COLUMNS = [
    "kind",
    "name",
    "device",
    "stream",
    "correlation",
    "pid",
    "tid",
    "start_ns",
    "end_ns",
    "grid",
    "block",
    "registers",
    "shared_bytes",
]


def load(path: Path) -> pd.DataFrame:
    """The timeline of an nsys ``.sqlite`` export or a PyTorch-profiler ``.json`` trace."""
    if not path.is_file():
        raise ConfigError(f"no such capture: {path}")
    if path.suffix == ".sqlite":
        return from_nsys_sqlite(path)
    if path.suffix == ".json":
        return from_kineto_json(path)
    raise ConfigError(f"{path}: a timeline capture is an nsys .sqlite export or a PyTorch-profiler .json trace")


def _frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    df = pd.DataFrame(list(rows), columns=COLUMNS)
    if len(df):  # every analysis computes with whole nanoseconds, and an event's end never precedes its start
        for col in ("start_ns", "end_ns"):
            if not pd.api.types.is_integer_dtype(df[col]):
                raise ValueError(f"{col} holds a value that is not a whole number of nanoseconds")
        if (df["end_ns"] < df["start_ns"]).any():
            raise ValueError("an event ends before it starts")
    return df.sort_values(["start_ns", "kind"], kind="stable").reset_index(drop=True)


SQLITE_VALUE_BYTES = 16 << 20  # the longest string or blob read from an export (kernel names: a few KB at most)


def _open_export(path: Path) -> sqlite3.Connection:
    """An nsys export opened read-only, with no value longer than SQLITE_VALUE_BYTES and no function the schema names
    trusted (a file of a few KB can declare a view of endless rows or a column computed as a gigabyte: only tables
    are read, and those limits bound what a row may cost)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    if hasattr(db, "setlimit"):  # Python 3.11+
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_VALUE_BYTES)
    db.execute("pragma trusted_schema = off")
    return db


def from_nsys_sqlite(path: Path) -> pd.DataFrame:
    inputs.check_size(path)
    try:
        db = _open_export(path)
    except sqlite3.Error as e:
        raise ConfigError(f"cannot open {path}: {e}") from None
    try:
        tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            raise ConfigError(f"{path} holds no CUDA kernel activity (was nsys run with -t cuda?)")
        if "StringIds" not in tables:  # a view of that name may yield rows without end
            raise ConfigError(f"{path} is not a readable nsys SQLite export: its StringIds is no table")
        names = dict(db.execute("select id, value from StringIds"))
        rows: list[dict[str, Any]] = []
        for r in db.execute(
            "select start, end, deviceId, streamId, correlationId, globalPid, shortName, gridX, gridY, "
            "gridZ, blockX, blockY, blockZ, registersPerThread, staticSharedMemory + "
            "dynamicSharedMemory from CUPTI_ACTIVITY_KIND_KERNEL"
        ):
            rows.append(
                {
                    "kind": "kernel",
                    "name": names.get(r[6], str(r[6])),
                    "device": r[2],
                    "stream": r[3],
                    "correlation": r[4],
                    "pid": r[5] >> 24,
                    "tid": None,
                    "start_ns": r[0],
                    "end_ns": r[1],
                    "grid": (r[7], r[8], r[9]),
                    "block": (r[10], r[11], r[12]),
                    "registers": r[13],
                    "shared_bytes": r[14],
                }
            )
        for kind, table in (("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"), ("memset", "CUPTI_ACTIVITY_KIND_MEMSET")):
            if table in tables:
                for r in db.execute(
                    f"select start, end, deviceId, streamId, correlationId, globalPid, bytes from {table}"
                ):
                    rows.append(
                        {
                            "kind": kind,
                            "name": f"{kind} {r[6]} B",
                            "device": r[2],
                            "stream": r[3],
                            "correlation": r[4],
                            "pid": r[5] >> 24,
                            "start_ns": r[0],
                            "end_ns": r[1],
                        }
                    )
        for kind, table in (("runtime", "CUPTI_ACTIVITY_KIND_RUNTIME"), ("driver", "CUPTI_ACTIVITY_KIND_DRIVER")):
            if table in tables:
                for r in db.execute(f"select start, end, correlationId, globalTid, nameId from {table}"):
                    rows.append(
                        {
                            "kind": kind,
                            "name": names.get(r[4], str(r[4])),
                            "correlation": r[2],
                            "pid": r[3] >> 24,
                            "tid": r[3] & 0xFFFFFF,
                            "start_ns": r[0],
                            "end_ns": r[1],
                        }
                    )
        if "NVTX_EVENTS" in tables:
            for r in db.execute(
                "select start, end, coalesce(text, (select value from StringIds where id = textId)), "
                "globalTid from NVTX_EVENTS where end is not null"
            ):
                rows.append(
                    {
                        "kind": "nvtx",
                        "name": r[2],
                        "pid": r[3] >> 24,
                        "tid": r[3] & 0xFFFFFF,
                        "start_ns": r[0],
                        "end_ns": r[1],
                    }
                )
        return _frame(rows)
    except (sqlite3.Error, TypeError, ValueError) as e:  # a missing column, or a NULL or text where numbers belong
        raise ConfigError(f"{path} is not a readable nsys SQLite export: {e}") from None
    finally:
        db.close()


# (kineto's gpu_user_annotation, a CPU annotation redrawn over the GPU work it covered, is left out: the work
# is matched to its range through correlation ids instead)
KINETO_KINDS = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "cuda_runtime": "runtime",
    "cuda_driver": "driver",
    "user_annotation": "nvtx",
}


KINETO = "a PyTorch-profiler Chrome trace"


def from_kineto_json(path: Path) -> pd.DataFrame:
    try:
        data = inputs.read_json(path, KINETO)
        events = data["traceEvents"]
    except (KeyError, TypeError):  # JSON, but not an object holding the trace's events
        raise ConfigError(
            f"{path} is not {KINETO}: it has no traceEvents list (a .json capture is what torch.profiler's "
            "export_chrome_trace writes)"
        ) from None
    except OSError as e:
        raise ConfigError(f"{path} is not {KINETO}: {e.strerror or e}") from None
    other = data.get("otherData")
    if isinstance(other, dict) and other.get("written_by") == "kbench":
        raise ConfigError(
            f"{path} is kbench's own trace for viewing; analyse the raw capture beside it (timeline.sqlite or "
            "pytorch_trace.json)"
        )
    if not isinstance(events, list):
        raise ConfigError(f"{path} is not {KINETO}: traceEvents is not a list")
    rows = []
    for i, ev in enumerate(events):
        try:
            row = _kineto_row(ev)
        except (KeyError, TypeError, ValueError) as e:
            what = f"missing {e}" if isinstance(e, KeyError) else str(e)
            raise ConfigError(f"{path}: trace event {i} is malformed ({what})") from None
        if row is not None:
            rows.append(row)
    if not any(r["kind"] == "kernel" for r in rows):
        raise ConfigError(f"{path} holds no GPU kernel (was the profiler run with ProfilerActivity.CUDA?)")
    return _frame(rows)


NS_MAX = 2**63 - 1  # CUPTI's timestamps are 64-bit nanoseconds


def _number(value: Any, what: str) -> float:
    """A time in microseconds (the trace's unit) that is a 64-bit count of nanoseconds."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"{what} is {type(value).__name__}, not a number")
    v = float(value)
    if not math.isfinite(v) or abs(v) * 1000 > NS_MAX:
        raise ValueError(f"{what} is {value}")
    return v


def _whole(value: Any, what: str) -> int | None:
    """An id or count field: absent, or a whole number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value % 1:
        raise TypeError(f"{what} is {value!r}, not a whole number")
    return int(value)


def _dims(value: Any, what: str) -> tuple[int, ...] | None:
    if value is None or value == []:
        return None
    if not isinstance(value, list | tuple) or not 1 <= len(value) <= 3:
        raise TypeError(f"{what} is {value!r}, not 1 to 3 whole numbers")
    return tuple(_whole(v, what) or 0 for v in value)


def _kineto_row(ev: Any) -> dict[str, Any] | None:
    """One Chrome-trace event as a timeline row (None: an event kind kbench does not use)."""
    if not isinstance(ev, dict):
        raise TypeError(f"an event is {type(ev).__name__}, not an object")
    kind = KINETO_KINDS.get(ev.get("cat", "")) if isinstance(ev.get("cat", ""), str) else None
    if kind is None or ev.get("ph") != "X":
        return None
    args = ev.get("args") or {}
    if not isinstance(args, dict):
        raise TypeError(f"args is {type(args).__name__}, not an object")
    start = round(_number(ev["ts"], "ts") * 1000)  # microseconds in the trace
    dur = _number(ev.get("dur", 0), "dur")
    if dur < 0 or start + dur * 1000 > NS_MAX:
        raise ValueError(f"dur is {dur}")
    name = ev.get("name", "")
    if not isinstance(name, str):
        raise TypeError(f"name is {name!r}, not text")
    gpu = kind in GPU_KINDS
    thread = {k: _whole(ev.get(k), k) for k in ("pid", "tid")}  # a process / thread id (the kinds used here)
    return {
        "kind": kind,
        "name": name,
        "device": _whole(args.get("device"), "device"),
        "stream": _whole(args.get("stream"), "stream"),
        "correlation": _whole(args.get("correlation"), "correlation"),
        "pid": None if gpu else thread["pid"],
        "tid": None if gpu else thread["tid"],
        "start_ns": start,
        "end_ns": start + round(dur * 1000),
        "grid": _dims(args.get("grid"), "grid"),
        "block": _dims(args.get("block"), "block"),
        "registers": _whole(args.get("registers per thread"), "registers per thread"),
        "shared_bytes": _whole(args.get("shared memory"), "shared memory"),
    }


def ranges(tl: pd.DataFrame, name: str) -> list[tuple[int, int]]:
    """The occurrences of NVTX push/pop range ``name``, in time order."""
    r = tl[(tl["kind"] == "nvtx") & (tl["name"] == name)]
    return list(zip(r["start_ns"].astype(int), r["end_ns"].astype(int), strict=True))


def launched_in(tl: pd.DataFrame, start: int, end: int) -> pd.DataFrame:
    """GPU work whose launch call (runtime or driver API, matched by correlation id) began inside [start, end]."""
    return tl.iloc[Index(tl).launched_in(start, end)]


def overlapped_fraction(start: int, end: int, others: Iterable[tuple[int, int]]) -> float:
    """The share of [start, end) during which at least one of ``others`` was also running."""
    clipped = [(max(start, a), min(end, b)) for a, b in others if min(end, b) > max(start, a)]
    return covered(clipped) / (end - start) if end > start else 0.0


def busy(tl: pd.DataFrame, start: int, end: int) -> dict[str, float]:
    """Inside [start, end): time with any GPU work, with two or more kernels at once, and idle."""
    return Index(tl).usage(start, end)


def idle_gaps(tl: pd.DataFrame, start: int, end: int, top: int = 5) -> pd.DataFrame:
    """The largest stretches inside [start, end) with no GPU work, and the GPU work that precedes each."""
    import pandas as pd

    gaps = Index(tl).gaps(start, end, top)
    return pd.DataFrame([(g.start_ns, g.gap_us, g.after) for g in gaps], columns=["start_ns", "gap_us", "after"])


def device_name(path: Path) -> str | None:
    """The GPU a capture was made on, as the capture names it (None when it does not)."""
    try:
        if path.suffix == ".sqlite":
            inputs.check_size(path)
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                row = db.execute("select name from TARGET_INFO_GPU order by id limit 1").fetchone()
            finally:
                db.close()
            return str(row[0]) if row else None
        data = inputs.read_json(path)
        props = data.get("deviceProperties") if isinstance(data, dict) else None
        first = props[0] if isinstance(props, list) and props else None
        name = first.get("name") if isinstance(first, dict) else None
        return str(name) if name else None
    except (OSError, ConfigError, sqlite3.Error):
        return None
