"""`kbench runs`: the run folders under an output root, newest first, read from their params.json and result.json.

Reads only; a folder whose files are missing or unreadable is listed with what could be read (status ``unreadable``
when not even params.json is), never skipped silently and never an error for the whole listing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    device: str | None
    path: str
    error: str | None = None  # a failed or interrupted run's one line


def _started(stamp: str) -> str:
    """20261123T121408Z[-01] -> 2026-11-23T12:14:08Z (the folder name as it is when it has another shape)."""
    s = stamp.split("-")[0]
    if len(s) == 16 and s[8] == "T" and s.endswith("Z"):
        return f"{s[0:4]}-{s[4:6]}-{s[6:8]}T{s[9:11]}:{s[11:13]}:{s[13:15]}Z"
    return stamp


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_run(run_dir: Path) -> RunRow:
    from kbench.report.models import read_result, totals

    params = _json(run_dir / folder.PARAMS)
    result = read_result(run_dir)
    # <root>/<mode>/<kernel>/<params>/<stamp>: the path names what params.json cannot
    mode, kernel = run_dir.parent.parent.parent.name, run_dir.parent.parent.name
    p = params or {}
    duration = totals(result).duration_us if result is not None else None
    return RunRow(
        started=_started(run_dir.name),
        mode=str(p.get("mode") or mode),
        kernel=str(p.get("kernel") or kernel),
        version=str(p.get("version") or "n/a"),
        params=p.get("params") if isinstance(p.get("params"), dict) else {},
        status=(str(p.get("status") or "unknown") if not folder.died(p) else "died")
        if params is not None
        else "unreadable",
        duration_us=duration,
        bottleneck=result.figures.bottleneck if result is not None else None,
        device=result.device if result is not None else (p.get("device") or {}).get("name"),
        path=str(run_dir),
        error=p.get("error"),
    )


def run_dirs(root: Path, kernel: str | None = None) -> list[Path]:
    """Every run folder under ``root`` (of ``kernel`` only when given), newest first."""
    if not root.is_dir():
        return []
    found = [d for d in root.glob("*/*/*/*") if d.is_dir() and (kernel is None or d.parent.parent.name == kernel)]
    return sorted(found, key=lambda d: (d.name, str(d)), reverse=True)


def runs(root: Path, kernel: str | None = None, limit: int | None = None) -> list[RunRow]:
    return [read_run(d) for d in run_dirs(root, kernel)[:limit]]


def table(rows: list[RunRow]) -> str:
    """The rows as a fixed-width text table (params as name=value)."""
    head = f"{'started (UTC)':<22}{'mode':<11}{'kernel':<14}{'version':<10}{'duration us':>13}  {'bottleneck':<16}"
    lines = [f"{head}{'status':<12}params"]
    for r in rows:
        dur = "n/a" if r.duration_us is None else f"{r.duration_us:.2f}"
        values = ",".join(f"{k}={v}" for k, v in r.params.items()) or "n/a"
        lines.append(
            f"{r.started:<22}{r.mode:<11}{r.kernel:<14}{r.version:<10}{dur:>13}  {r.bottleneck or 'n/a':<16}"
            f"{r.status:<12}{values}"
        )
    return "\n".join(lines)
