"""A GPU timeline from Nsight Systems (SQLite export) or the PyTorch profiler (Chrome trace JSON) as one
normalized table, and the analyses on it: which kernels a range launched, overlap across streams, busy and
idle time, launch latency. Pure: a file in, tables out.

Columns: kind (kernel, memcpy, memset, runtime, driver, nvtx), name, device, stream, correlation, pid, tid,
start_ns, end_ns, grid, block, registers, shared_bytes (None where the source does not say).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

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
# SQLite's steps (VM instructions) a query may take per byte of the export: kbench's queries read each table once and
# real exports take under 0.1 a byte, so a budget far above that still ends a query the file makes cost without end
SQLITE_STEPS_PER_BYTE = 50
SQLITE_STEPS_FLOOR = 50_000_000  # the budget of a small export
PROGRESS_EVERY = 10_000  # steps between two checks of the budget (where a signal that arrived meanwhile is handled)


@dataclass
class _Guard:
    """SQLite's progress handler on an export: it stops a query past its budget of steps, and stops one where a
    signal arrived (Terminated, KeyboardInterrupt: raised as SQLite calls back, which SQLite would swallow), to be
    raised again once SQLite returned."""

    checks: int  # the budget, in calls of the handler
    spent: bool = False
    caught: BaseException | None = None

    def calls(self) -> Iterator[int]:
        """The handler's answers, one a call (0: go on, 1: stop); a generator so that a signal's exception, raised
        where the generator resumes, is inside its ``try``."""
        try:
            for _ in range(self.checks):
                yield 0
            self.spent = True
            while True:
                yield 1
        except GeneratorExit:  # the connection closed
            raise
        except BaseException as e:  # a signal handler's exception: kept, raised again once SQLite returned
            self.caught = e
        while True:
            yield 1


def _tables_only(action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
    """SQLite's authorizer on an export: a query may read tables; nothing a view, a trigger or a recursive query of
    the file's schema would run (a view of a few bytes can yield rows without end)."""
    if source is not None or action == sqlite3.SQLITE_RECURSIVE:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _uri(path: Path) -> str:
    """The ``file:`` URI of exactly ``path``, read-only: percent-quoted, so that ``%2e%2e``, ``?`` or ``#`` in a name
    are those characters (SQLite would decode them), the file the caller checked is the file opened."""
    return f"file://{quote(os.fsencode(path.absolute()))}?mode=ro"


@contextlib.contextmanager
def _open_export(path: Path) -> Iterator[sqlite3.Connection]:
    """An nsys export, opened the one way kbench queries SQLite: its size checked, read-only, no value longer than
    SQLITE_VALUE_BYTES, no function the schema names trusted, tables only (no view, trigger or recursive query runs),
    its queries' steps together within a budget that grows with the file. An SQLite error inside the block is the file's
    (ConfigError, one line); a signal that arrived during a query is raised again."""
    size = inputs.check_size(path)
    guard = _Guard(max(SQLITE_STEPS_FLOOR, size * SQLITE_STEPS_PER_BYTE) // PROGRESS_EVERY)
    try:
        db = sqlite3.connect(_uri(path), uri=True)
    except sqlite3.Error as e:
        raise ConfigError(f"cannot open {path}: {e}") from None
    try:
        if hasattr(db, "setlimit"):  # Python 3.11+
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_VALUE_BYTES)
        db.execute("pragma trusted_schema = off")
        db.set_authorizer(_tables_only)
        calls = guard.calls()
        next(calls)  # started: a signal at the generator's first step would land outside its try
        db.set_progress_handler(calls.__next__, PROGRESS_EVERY)
        yield db
    except sqlite3.Error as e:
        if guard.caught is not None:
            raise guard.caught from None
        why = f"a query ran past {guard.checks * PROGRESS_EVERY:,} steps of SQLite's" if guard.spent else str(e)
        raise ConfigError(f"{path} is not a readable nsys SQLite export: {why}") from None
    finally:
        db.close()


def from_nsys_sqlite(path: Path) -> pd.DataFrame:
    with _open_export(path) as db:
        try:
            return _frame(_nsys_rows(db, path))
        except (TypeError, ValueError) as e:  # a missing column, or a NULL or text where numbers belong
            raise ConfigError(f"{path} is not a readable nsys SQLite export: {e}") from None


def _nsys_rows(db: sqlite3.Connection, path: Path) -> list[dict[str, Any]]:
    """The export's kernels, copies, API calls and NVTX ranges as timeline rows."""
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
            for r in db.execute(f"select start, end, deviceId, streamId, correlationId, globalPid, bytes from {table}"):
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
    return rows


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


DEVICE_NAME_CHARS = 200  # a GPU's name ("NVIDIA H100 80GB HBM3") is a few words; a capture's longer one is not used


def device_name(path: Path) -> str | None:
    """The GPU a capture was made on, as the capture names it (None when it does not, or names it in more than one
    short line)."""
    try:
        if path.suffix == ".sqlite":
            with _open_export(path) as db:
                row = db.execute("select name from TARGET_INFO_GPU order by id limit 1").fetchone()
            name = row[0] if row else None
        else:
            data = inputs.read_json(path)
            props = data.get("deviceProperties") if isinstance(data, dict) else None
            first = props[0] if isinstance(props, list) and props else None
            name = first.get("name") if isinstance(first, dict) else None
    except (OSError, ConfigError):
        return None
    name = str(name) if name else None
    return name if name and len(name) <= DEVICE_NAME_CHARS and name.isprintable() else None
