"""`kbench devlog RUN`: one development-log entry (report contract section 6) appended to docs/kernels/<kernel>.md.

Each entry carries its figures in a one-line HTML comment (``<!-- kbench-devlog {...} -->``, invisible when the
markdown is rendered); vs Previous compares with the last entry of the same mode and parameters found that way.
The file is only ever appended to: earlier entries are never rewritten.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kbench.analysis.access_figures import plan_access
from kbench.fsutil import open_plain
from kbench.inputs import read_limited
from kbench.report.models import ProfileResult, totals
from kbench.report.render import num

MARK = re.compile(r"^<!-- kbench-devlog (\{.*\}) -->$", re.M)


def figures(r: ProfileResult) -> dict[str, Any]:
    """The plan-level figures of the entry: duration, achieved TFLOP/s and GB/s, and (counter modes) occupancy and
    tensor-core utilisation weighted by stage time; None where not measured or not modelled."""
    stages = r.figures.stages
    plan = totals(r)

    def weighted(key: str) -> float | None:
        have = [(getattr(s, key), s.duration_us) for s in stages if getattr(s, key) is not None]
        weight = sum(d for _, d in have)
        return sum(v * d for v, d in have) / weight if have and weight else None

    found: dict[str, Any] = {
        "duration_us": plan.duration_us,
        "tflops": plan.tflops,
        "gbps": plan.gbps,
        "occ_pct": weighted("occ_pct"),
        "tc_pct": weighted("tc_pct"),
    }
    if r.figures.timer == "interpreter" and r.sections.accesses is not None:  # what an access run compares instead
        found["access"] = plan_access(stages, r.sections.accesses.sites())
    return found


def _access_rows(f: dict[str, Any], p: dict[str, Any], device: str) -> list[str]:
    """An access run's rows: what its trace predicts, each vs the previous entry's (the interpreter's time is not
    compared: CPU time)."""
    a, b = f.get("access") or {}, p.get("access") or {}
    use, worst, masked, moved = (a.get(k) for k in ("sector_use", "worst_sector_use", "masked_pct", "requested_bytes"))
    return [
        f"| Predicted time on {device} (from the trace) | {num(a.get('predicted_us'))} μs | "
        f"{_faster(b.get('predicted_us'), a.get('predicted_us'))} |",
        f"| Bytes used per 32-B sector, all lines (predicted) | {'n/a' if use is None else f'{use:.1f}'} | "
        f"{_delta(b.get('sector_use'), use)} |",
        f"| Bytes used per 32-B sector, worst line (predicted) | {'n/a' if worst is None else f'{worst:.1f}'} | "
        f"{_delta(b.get('worst_sector_use'), worst)} |",
        f"| Masked lanes (predicted) | {'n/a' if masked is None else f'{masked:.1f}%'} | "
        f"{_delta(b.get('masked_pct'), masked, points=True)} |",
        f"| Bytes loaded and stored (predicted) | {'n/a' if moved is None else f'{moved:.0f}'} | "
        f"{_delta(b.get('requested_bytes'), moved)} |",
    ]


def previous_entry(text: str, mode: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The last entry of ``text`` with the same mode and parameters."""
    found = None
    for m in MARK.finditer(text):
        try:
            entry = json.loads(m.group(1))
        except ValueError:
            continue
        if entry.get("mode") == mode and entry.get("params") == params:
            found = entry
    return found


def _faster(prev: float | None, cur: float | None) -> str:
    if prev is None or cur is None or cur <= 0 or prev <= 0:
        return "--"
    change = 100.0 * (prev / cur - 1.0)
    return f"{abs(change):.1f}% {'faster' if change >= 0 else 'slower'}"


def _delta(prev: float | None, cur: float | None, points: bool = False) -> str:
    if prev is None or cur is None:
        return "--"
    if points:
        return f"{cur - prev:+.1f} pp"
    return f"{100.0 * (cur - prev) / prev:+.1f}%" if prev else "--"


def entry(r: ProfileResult, run_dir: Path, insights: list[str], previous: dict[str, Any] | None) -> str:
    """One entry in the contract's template, headed by the version, mode, date and run folder."""
    f = figures(r)
    p = (previous or {}).get("figures", {})
    clocks = (
        "locked clocks"
        if r.clocks.startswith("locked")
        else "unlocked clocks"
        if r.clocks.startswith("not locked")
        else "clocks not recorded"
    )
    sizes = ", ".join(f"{k}={v}" for k, v in r.params.items() if k != "dtype")
    dtype = r.params.get("dtype", "n/a")
    issues = [f"{s.name}: {s.key_issue}" for s in r.figures.stages if s.key_issue]
    issues += [f"{o.name} (est. {o.gain_pct:.1f}%; {o.metric} = {o.value})" for o in r.figures.opportunities[:3]]
    record = {
        "run": str(run_dir),
        "kernel": r.kernel,
        "version": r.version,
        "mode": r.mode,
        "params": r.params,
        "figures": f,
    }
    vs = f"vs {previous['version']} (`{previous['run']}`)" if previous else "no earlier entry with these parameters"
    on = f"{r.device}, {clocks}"
    duration = f"| Duration | {num(f['duration_us'])} μs | {_faster(p.get('duration_us'), f['duration_us'])} |"
    if r.figures.timer == "interpreter":  # no GPU ran: its time is the CPU interpreter's, never compared as GPU time
        on = f"predicted for {r.device}, no GPU used"
        shown = "--" if previous is None else "not compared (CPU time)"
        duration = "\n".join(
            [f"| Interpreter time (CPU, not GPU time) | {num(f['duration_us'])} μs | {shown} |",
             *_access_rows(f, p, r.device)]
        )  # fmt: skip
    lines = [
        "",
        f"### {r.kernel} {r.version} ({r.mode} mode, {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M')} UTC)",
        f"<!-- kbench-devlog {json.dumps(record, sort_keys=True)} -->",
        "",
        f"Run: `{run_dir}`; vs Previous: {vs}.",
        "",
        f"**Performance** ({on}, {dtype}, {sizes or 'n/a'}):",
        "",
        "| Metric | Value | vs Previous |",
        "|---|---|---|",
        duration,
        f"| Achieved TFLOPs/s | {num(f['tflops'])} | {_delta(p.get('tflops'), f['tflops'])} |",
        f"| Achieved GB/s | {num(f['gbps'])} | {_delta(p.get('gbps'), f['gbps'])} |",
        f"| Occupancy | {_pct(f['occ_pct'])} | {_delta(p.get('occ_pct'), f['occ_pct'], points=True)} |",
        f"| TC Util | {_pct(f['tc_pct'])} | {_delta(p.get('tc_pct'), f['tc_pct'], points=True)} |",
        "",
        f"**Bottleneck**: {r.figures.bottleneck}",
        "",
        "**Issues**:",
        *([f"- {i}" for i in issues] or ["- none found in this run's data"]),
        "",
        "**Insights**:",
        *([f"- {i}" for i in insights] or ["- (none written: `kbench devlog RUN --insight TEXT`)"]),
        "",
    ]
    return "\n".join(lines)


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f}%"


def append(r: ProfileResult, run_dir: Path, docs: Path, insights: list[str]) -> tuple[Path, str]:
    """Append the run's entry to ``docs/<kernel>.md`` (created with a title when new); the file and the entry. The
    kernel's name is one file name (ProfileResult checks it), and the file is opened as a plain file of its own, so
    the entry lands in the docs folder and nowhere a link there points."""
    docs.mkdir(parents=True, exist_ok=True)
    path = docs / f"{r.kernel}.md"
    with os.fdopen(open_plain(path, os.O_RDWR | os.O_CREAT | os.O_APPEND), "r+b") as f:
        text = read_limited(f, path).decode(errors="replace")  # inputs.TooLarge: a devlog past its limit is not read
        new = entry(r, run_dir, insights, previous_entry(text, r.mode, r.params))
        if not text:
            f.write(f"# {r.kernel}: development log\n\nOne entry per profiled version (`kbench devlog`).\n".encode())
        f.write(new.encode())
    return path, new
