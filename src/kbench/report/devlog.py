"""`kbench devlog RUN`: one development-log entry (report contract section 6) appended to docs/kernels/<kernel>.md.

Each entry carries its figures in a one-line HTML comment (``<!-- kbench-devlog {...} -->``, invisible when the
markdown is rendered); vs Previous compares with the last entry of the same mode and parameters found that way.
The file is only ever appended to: earlier entries are never rewritten. Every value an entry quotes (from
result.json, an earlier entry, an insight) is put in as one line of text (``inline``): no line break, control
character, table bar or raw HTML of its own, so no value starts a heading, a table row or ends the comment.
"""

from __future__ import annotations

import json
import math
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kbench.analysis.access_figures import plan_access
from kbench.analysis.devices import chip_name
from kbench.fsutil import default_here, open_plain, write_target
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
    """The last entry of ``text`` with the same mode and parameters (one that is not JSON, nests deeper than Python
    parses or is not an object is passed over: the file is anyone's to edit)."""
    found = None
    for m in MARK.finditer(text):
        try:
            entry = json.loads(m.group(1))
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict) and entry.get("mode") == mode and entry.get("params") == params:
            found = entry
    return found


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # line breaks, tabs, escapes: none in one line of text
_BLOCK_START = re.compile(r"[#>*+=-]|\d+[.)]")  # what begins a heading, quote, list or table at a line's start


def _one_line(value: object) -> str:
    """``value``'s text with control characters and line breaks as single spaces."""
    return " ".join(_CONTROL.sub(" ", str(value)).split())


def inline(value: object) -> str:
    """``value`` as markdown text within one line: control characters and line breaks as spaces, a table's bar and
    raw HTML escaped, a leading character that would open a block (``#``, ``>``, ``-``, ``1.``) escaped."""
    text = _one_line(value)
    text = text.replace("|", "\\|").replace("<", "&lt;")
    if m := _BLOCK_START.match(text):
        text = f"{text[: m.end() - 1]}\\{text[m.end() - 1 :]}"
    return text


def code(value: object) -> str:
    """``value`` as an inline code span on one line (a path): fenced by more backticks than it holds in a row."""
    text = _one_line(value)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if "`" in text else f"`{text}`"


def _number(value: object) -> float | None:
    """A figure read back from an earlier entry (anyone's to edit): a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        return None
    return number if math.isfinite(number) else None


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
    earlier = (previous or {}).get("figures")
    earlier = earlier if isinstance(earlier, dict) else {}
    p: dict[str, Any] = {k: _number(v) for k, v in earlier.items()}
    if isinstance(earlier.get("access"), dict):  # an access run's predictions, read back as figures are
        p["access"] = {k: _number(v) for k, v in earlier["access"].items()}
    clocks = (
        "locked clocks"
        if r.clocks.startswith("locked")
        else "unlocked clocks"
        if r.clocks.startswith("not locked")
        else "clocks not recorded"
    )
    sizes = inline(", ".join(f"{k}={v}" for k, v in r.params.items() if k != "dtype"))
    dtype = inline(r.params.get("dtype", "n/a"))
    issues = [f"{s.name}: {s.key_issue}" for s in r.figures.stages if s.key_issue]
    issues += [f"{o.name} (est. {o.gain_pct:.1f}%; {o.metric} = {o.value})" for o in r.figures.opportunities[:3]]
    issues = [inline(i) for i in issues]
    record = {
        "run": str(run_dir),
        "kernel": r.kernel,
        "version": r.version,
        "mode": r.mode,
        "params": r.params,
        "figures": f,
    }
    vs = (
        f"vs {inline(previous.get('version'))} ({code(previous.get('run'))})"
        if previous
        else "no earlier entry with these parameters"
    )
    device = chip_name(r.device, r.device_key)  # one chip, one name, whichever machine ran it
    on = f"{inline(device)}, {clocks}"
    duration = f"| Duration | {num(f['duration_us'])} μs | {_faster(p.get('duration_us'), f['duration_us'])} |"
    if r.figures.timer == "interpreter":  # no GPU ran: its time is the CPU interpreter's, never compared as GPU time
        on = f"predicted for {inline(device)}, no GPU used"
        shown = "--" if previous is None else "not compared (CPU time)"
        duration = "\n".join(
            [f"| Interpreter time (CPU, not GPU time) | {num(f['duration_us'])} μs | {shown} |",
             *_access_rows(f, p, inline(device))]
        )  # fmt: skip
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    lines = [
        "",
        f"### {inline(r.kernel)} {inline(r.version)} ({inline(r.mode)} mode, {when} UTC)",
        f"<!-- kbench-devlog {comment(record)} -->",
        "",
        f"Run: {code(run_dir)}; vs Previous: {vs}.",
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
        f"**Bottleneck**: {inline(r.figures.bottleneck)}",
        "",
        "**Issues**:",
        *([f"- {i}" for i in issues] or ["- none found in this run's data"]),
        "",
        "**Insights**:",
        *([f"- {inline(i)}" for i in insights] or ["- (none written: `kbench devlog RUN --insight TEXT`)"]),
        "",
    ]
    return "\n".join(lines)


def comment(record: dict[str, Any]) -> str:
    """The entry's figures as JSON inside its HTML comment, on one line: '<', '>' and '&' written as JSON escapes, so
    that no value ends the comment (``-->``) or opens a tag."""
    text = json.dumps(record, sort_keys=True, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f}%"


DOCS = "docs/kernels"  # the development logs' folder by default, in the folder the command runs in


def default_docs() -> Path:
    """docs/kernels here, unless here is kbench's own checkout or package (UsageError: give --docs)."""
    return default_here(DOCS, "--docs")


def append(r: ProfileResult, run_dir: Path, docs: Path, insights: list[str]) -> tuple[Path, str]:
    """Append the run's entry to ``docs/<kernel>.md`` (created with a title when new); the file and the entry. The
    docs folder is refused where it is a link or leads out of the folder it is named in through one
    (fsutil.write_target), the kernel's name is one file name (ProfileResult checks it), and the file is opened as a
    plain file of its own, so the entry lands in the docs folder and nowhere a link there points."""
    write_target(docs, "the docs folder")
    docs.mkdir(parents=True, exist_ok=True)
    path = docs / f"{r.kernel}.md"
    with os.fdopen(open_plain(path, os.O_RDWR | os.O_CREAT | os.O_APPEND), "r+b") as f:
        text = read_limited(f, path).decode(errors="replace")  # inputs.TooLarge: a devlog past its limit is not read
        new = entry(r, run_dir, insights, previous_entry(text, r.mode, r.params))
        if not text:
            f.write(f"# {r.kernel}: development log\n\nOne entry per profiled version (`kbench devlog`).\n".encode())
        f.write(new.encode())
    return path, new
