"""`kbench runs`: the run folders under an output root, newest first, read from their params.json and result.json.

Reads only; a folder whose files are missing, unreadable, malformed or symbolic links is listed with what could be
read (status ``unreadable`` when not even params.json is), never skipped silently and never an error for the whole
listing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbench.analysis.devices import DeviceTable, table_or_none
from kbench.fsutil import json_object
from kbench.model import Model
from kbench.report import folder


class RunRow(Model):
    """One run folder, as the table and ``--json`` show it."""

    started: str  # the folder's UTC timestamp, ISO 8601
    mode: str
    kernel: str
    version: str
    params: dict[str, Any]
    status: str  # running, ok, failed, interrupted, died (its process is gone), unreadable
    duration_us: float | None  # the whole plan's measured median, else the sum of the stage medians
    bottleneck: str | None
    device: str | None  # the chip as conf/devices.json names it (its display name): one name for all runs on it
    path: str
    error: str | None = None  # a failed or interrupted run's one line
    device_reported: str | None = None  # the name the run recorded (NVML's, a capture's), where it is not ``device``


def _started(stamp: str) -> str:
    """20261123T121408Z[-01] -> 2026-11-23T12:14:08Z (the folder name as it is when it has another shape)."""
    if not folder.stamped(stamp):
        return stamp
    s = stamp.split("-")[0]
    return f"{s[0:4]}-{s[4:6]}-{s[6:8]}T{s[9:11]}:{s[11:13]}:{s[13:15]}Z"


def _text(value: Any) -> str | None:
    """A field of params.json as text (a hand-edited or corrupt file may hold any JSON type there)."""
    return None if value is None else str(value)


STATUSES = {
    "running": "its process is still at work",
    "ok": "finished, report written",
    "failed": "stopped with an error (params.json's error, FAILED.txt)",
    "interrupted": "Ctrl-C or a signal ended it",
    "undecided": "a timeline without a plan that kbench could not classify: timeline.md, no report.md",
    "died": "its process is gone without a word (killed -9, the machine restarted)",
    "unreadable": "not even params.json could be read",
}


def read_run(run_dir: Path, devices: DeviceTable | None = None) -> RunRow:
    """One run folder's row; ``devices``: the table that names its chip (None: the name it recorded)."""
    from kbench.report.models import read_result, totals

    params = json_object(run_dir / folder.PARAMS)
    result = read_result(run_dir)
    p = params or {}
    # <root>/<mode>/<kernel>/<params>/<stamp>: the path names what an unreadable params.json cannot
    standard = folder.stamped(run_dir.name)
    mode, kernel = (run_dir.parent.parent.parent.name, run_dir.parent.parent.name) if standard else ("n/a", "n/a")
    # a run that used no GPU (params.json's "gpu": false, access mode) timed the interpreter, not a kernel
    duration = totals(result).duration_us if result is not None and p.get("gpu", True) else None
    named: dict[str, Any] = d if isinstance(d := p.get("device"), dict) else {}  # {"name": ..., "key": ...}
    recorded = result.device if result is not None else _text(named.get("name"))
    key = result.device_key if result is not None else _text(named.get("key"))
    chip = devices.chip_name(recorded, key) if devices is not None else recorded
    return RunRow(
        started=_started(run_dir.name) if standard else str(p.get("started_at") or "n/a")[:19] + "Z" * bool(p),
        mode=str(p.get("mode") or mode),
        kernel=str(p.get("kernel") or kernel),
        version=str(p.get("version") or "n/a"),
        params=p.get("params") if isinstance(p.get("params"), dict) else {},
        status=(str(p.get("status") or "unknown") if not folder.died(p) else "died")
        if params is not None
        else "unreadable",
        duration_us=duration,
        bottleneck=result.figures.bottleneck if result is not None else None,
        device=chip,
        path=str(run_dir),
        error=_text(p.get("error")),
        device_reported=recorded if recorded != chip else None,
    )


def is_run(d: Path) -> bool:
    """A run folder: it holds params.json, or (a run whose params.json is gone) it is named by a timestamp as kbench
    names runs and is no sweep's folder."""
    if (d / folder.PARAMS).is_file():
        return True
    return folder.stamped(d.name) and not (d / "sweep.json").exists()  # a sweep's folder is named so too


def _found(root: Path) -> list[Path]:
    """Every run folder under ``root``, at any depth (kbench's own layout, committed examples, renamed copies; not
    the folders inside a run)."""
    found: list[Path] = []
    todo = [root] if root.is_dir() else []
    while todo:
        here = todo.pop()
        for d in sorted(p for p in here.iterdir() if p.is_dir() and not p.is_symlink()):
            if is_run(d):
                found.append(d)  # what lies inside a run (tiling/, compiled/, source/) is not a run
            else:
                todo.append(d)
    return found


def runs(root: Path, kernel: str | None = None, limit: int | None = None) -> list[RunRow]:
    """The run folders under ``root`` (of ``kernel`` only when given), each read once, newest first."""
    devices = table_or_none()  # read once; a malformed one (KBENCH_DEVICES) costs the listing its names, not its rows
    rows = [r for d in _found(root) if (r := read_run(d, devices)) and (kernel is None or r.kernel == kernel)]
    return sorted(rows, key=lambda r: (r.started, r.path), reverse=True)[:limit]


def run_dirs(root: Path, kernel: str | None = None) -> list[Path]:
    """The folders of ``runs``, newest first."""
    return [Path(r.path) for r in runs(root, kernel)]


def table(rows: list[RunRow]) -> str:
    """The rows as a text table whose columns are as wide as their widest value (params as name=value), each
    folder's path last."""
    cells = [
        [
            r.started,
            r.mode,
            r.kernel,
            r.version,
            "n/a" if r.duration_us is None else f"{r.duration_us:.2f}",
            r.bottleneck or "n/a",
            r.status,
            ",".join(f"{k}={v}" for k, v in r.params.items()) or "n/a",
            r.path,
        ]
        for r in rows
    ]
    head = ["started (UTC)", "mode", "kernel", "version", "duration us", "bottleneck", "status", "params", "folder"]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
    right = {4}  # the duration is a number

    def line(c: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(c, widths, strict=True))
        ).rstrip()

    return "\n".join(line(c) for c in [head, *cells])
