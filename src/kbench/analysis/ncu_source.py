"""Source-level views of an Nsight Compute report (needs `--import-source yes` and the source counters of ncu's
full set): per SASS instruction its source line, executions and sampled stalls; per source line the same summed,
hottest first. Pure: an ncu-report action in, rows out."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kbench.analysis import lines
from kbench.analysis.lines import LineModel

STALL = "smsp__pcsamp_warps_issue_stalled_"


def _per_pc(action: Any, name: str) -> dict[int, float]:
    m = action.metric_by_name(name)
    if m is None or not m.has_correlation_ids():
        return {}
    ids = m.correlation_ids()
    return {int(ids.as_uint64(i)): float(m.as_double(i)) for i in range(m.num_instances())}


def sass_rows(action: Any, with_sass: bool = True, known: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Per SASS instruction: address, source file:line, SASS (without ``with_sass``: empty, the costly part of
    reading: ncu_report readies its disassembler on a process's first SASS, 0.4-0.5 s), instructions executed,
    stall samples by reason. ``known``: SASS already read by address (``sass_table``), taken from there, and what is
    read here added to it."""

    def sass(pc: int) -> str:
        if not with_sass:
            return ""
        if known is None:
            return str(action.sass_by_pc(pc)).strip()
        if hex(pc) not in known:
            known[hex(pc)] = str(action.sass_by_pc(pc)).strip()
        return known[hex(pc)]

    executed = _per_pc(action, "inst_executed")
    stalls = {
        n[len(STALL) :]: _per_pc(action, n)
        for n in action.metric_names()
        if n.startswith(STALL) and not n.endswith("_not_issued")
    }
    rows = []
    for pc in sorted(set(executed) | {p for v in stalls.values() for p in v}):
        info = action.source_info(pc)
        by_reason = {r: v[pc] for r, v in stalls.items() if v.get(pc)}
        rows.append(
            {
                "pc": hex(pc),
                "file": info.file_name() if info else "",
                "line": info.line() if info else 0,
                "sass": sass(pc),
                "inst_executed": executed.get(pc, 0.0),
                "stall_samples": sum(by_reason.values()),
                "top_stall": max(by_reason, key=by_reason.__getitem__) if by_reason else "",
                "stalls": by_reason,  # per reason (the line model's); the sass/*.csv table leaves it out
            }
        )
    return rows


def sources(action: Any) -> dict[str, list[str]]:
    """The source files the report imported (``--import-source yes``), each as its lines."""
    return {str(k): str(action.source_files()[k]).splitlines() for k in action.source_files()}


def line_model(action: Any, known: dict[str, str] | None = None) -> LineModel | None:
    """Time by source line of one profiled kernel; None without source counters (no per-PC instructions) or line
    information. ``known``: as ``sass_rows`` takes it."""
    m = action.metric_by_name("inst_executed")
    if m is None or not m.has_correlation_ids():
        return None
    rows = sass_rows(action, known=known)
    if not any(r["line"] for r in rows):
        return None  # compiled without line information (a library kernel): no source line to attribute to
    return lines.measured(str(action.name()), rows, sources(action))


def annotated_source(action: Any) -> list[dict[str, Any]]:
    """Each source line with its instructions executed and sampled stalls (summed over its SASS), hottest first."""
    files = sources(action)
    lines: dict[tuple[str, int], dict[str, Any]] = {}
    for r in sass_rows(action, with_sass=False):
        key = (r["file"], int(r["line"]))
        entry = lines.setdefault(
            key, {"file": key[0], "line": key[1], "inst_executed": 0.0, "stall_samples": 0.0, "stalls": {}}
        )
        entry["inst_executed"] += r["inst_executed"]
        entry["stall_samples"] += r["stall_samples"]
        if r["top_stall"]:
            entry["stalls"][r["top_stall"]] = entry["stalls"].get(r["top_stall"], 0.0) + r["stall_samples"]
    out = []
    for (file, line), e in lines.items():
        text = files.get(file, [])
        e["source"] = text[line - 1].rstrip() if 0 < line <= len(text) else ""
        e["top_stall"] = max(e["stalls"], key=e["stalls"].__getitem__) if e["stalls"] else ""
        del e["stalls"]
        out.append(e)
    return sorted(out, key=lambda e: (-e["stall_samples"], -e["inst_executed"]))


def hot_lines(action: Any, top: int = 3) -> list[str]:
    """``file:line `source` (top stall)`` of the lines with the most stall samples; none without source counters."""
    if not any(n.startswith(STALL) for n in action.metric_names()):
        return []
    return [
        f"{Path(e['file']).name}:{e['line']} `{e['source'].strip()}` ({e['top_stall'] or 'n/a'})"
        for e in annotated_source(action)[:top]
        if e["stall_samples"] > 0
    ]


SASS_TEXT = re.compile(r"[ -~]{1,300}")  # one SASS instruction as ncu_report prints it: printable ASCII, one line
PC = re.compile(r"0x[0-9a-f]{1,16}")
KERNEL_INDEX = re.compile(r"[0-9]{1,9}")  # ASCII digits: str.isdigit() takes "²", which int() refuses


def sass_record(capture_sha256: str, tables: dict[int, dict[str, str]]) -> dict[str, Any]:
    """The SASS read of a capture's kernels, kept beside it (sass.json) so that its next analysis skips ncu_report's
    disassembler: by kernel (its index in the report) and address."""
    return {"capture_sha256": capture_sha256, "kernels": {str(i): t for i, t in sorted(tables.items()) if t}}


def sass_table(record: dict[str, Any] | None, capture_sha256: str) -> dict[int, dict[str, str]]:
    """``sass_record``'s tables where ``record`` was made of this very capture (its digest); of each kernel the
    entries that read as an address and one line of SASS (anything else is left to ncu_report), else {}."""
    if record is None or record.get("capture_sha256") != capture_sha256 or not isinstance(record.get("kernels"), dict):
        return {}
    out: dict[int, dict[str, str]] = {}
    for index, table in record["kernels"].items():
        if isinstance(index, str) and KERNEL_INDEX.fullmatch(index) and isinstance(table, dict):
            out[int(index)] = {
                pc: text
                for pc, text in table.items()
                if isinstance(text, str) and PC.fullmatch(pc) and SASS_TEXT.fullmatch(text) and "`" not in text
            }
    return out
