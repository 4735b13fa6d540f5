"""Time by source line as a run folder's file: source/<stage>.md (measured: ncu and annotation modes) or
lines/<stage>.md (static, from the compiled kernel: event mode), one table per kernel, hottest line first."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kbench.analysis import opcodes as oc
from kbench.analysis.catalogue.lines import cause
from kbench.analysis.lines import Line, LineModel
from kbench.fsutil import safe, write_text_atomic

ROWS = 40  # lines per kernel: the hottest; the rest hold little


def _cell(text: str) -> str:
    return text.strip().replace("|", "/").replace("`", "'")


def _code(x: Line) -> str:
    return f"`{_cell(x.code)}`" if x.code else "(source not at hand)"


def _what(x: Line, model: LineModel) -> str:
    """What the line's instructions are, as the catalogue names them (catalogue/lines.py): an mbarrier wait with
    the barrier it waits on and what completes it, read from the kernel's other lines."""
    found = cause(x, model=model)
    return _cell(found.what) if found else ""


def table(model: LineModel) -> list[str]:
    """One kernel's lines as a markdown table, hottest first."""
    if model.static:
        head = "| File:line | Instructions (static) | In loops | Share of loops | Pipes | Opcodes | What | Code |"
        rows = [
            f"| {x.where} | {x.instructions:.0f} | {x.looped:.0f} | {pct(x.looped, model.looped)} | "
            f"{_pipes(x.pipes)} | {_cell(x.opcode_words())} | {_what(x, model)} | {_code(x)} |"
            for x in model.lines[:ROWS]
        ]
    else:
        head = (
            "| File:line | Instructions executed | Share | Stall samples | Share | Top stall | Pipes | Opcodes | What "
            "| Code |"
        )
        rows = [
            f"| {x.where} | {x.instructions:.0f} | {pct(x.instructions, model.instructions)} | {x.samples or 0:.0f} | "
            f"{pct(x.samples or 0.0, model.samples)} | {x.top_stall or 'n/a'} | {_pipes(x.pipes)} | "
            f"{_cell(x.opcode_words())} | {_what(x, model)} | {_code(x)} |"
            for x in model.lines[:ROWS]
        ]
    more = len(model.lines) - ROWS
    tail = ["", f"({more} more lines, each holding less)"] if more > 0 else []
    return [head, "|" + "---|" * (head.count("|") - 1), *rows, *tail]


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def _pipes(pipes: dict[str, float]) -> str:
    total = sum(pipes.values())
    return ", ".join(f"{oc.PIPE_WORDS[p]} {100 * n / total:.0f}%" for p, n in list(pipes.items())[:3]) if total else ""


def write(run_dir: Path, folder: str, stage: str, models: Sequence[LineModel]) -> Path:
    """``folder``/<stage>.md with each kernel's table (``folder``: "source" measured, "lines" static)."""
    static = any(m.static for m in models)
    order = (
        "as written, those inside loops first"
        if static
        else "executed and the warp-state samples on them, hottest first"
    )
    intro = (
        f"Each source line of the compiled kernel with its instructions {order}"
        "; the pipes and opcodes of its instructions, and what the catalogue makes of them. Source: "
        f"{models[0].source if models else 'none (no per-line information in this capture)'}."
    )
    out = [f"# Time by source line: stage {stage}", "", intro, ""]
    for m in models:
        out += [f"## Kernel {m.kernel}", "", *table(m), ""]
    if not models:
        out += ["(none: the capture has no source counters, or its kernels no line information, as a library's)", ""]
    path = run_dir / folder / f"{safe(stage)}.md"
    path.parent.mkdir(exist_ok=True)
    write_text_atomic(path, "\n".join(out) + "\n")
    return path
