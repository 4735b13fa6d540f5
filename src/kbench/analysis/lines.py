"""Time by source line: for each source line of a stage's kernel, the instructions it executed, the warp-stall
samples on them and their top reason, the opcodes on it with their pipes, its share of the kernel's instructions and
samples, and its code. Pure.

Three sources build the same model:
- measured (ncu's source counters, ncu and annotation modes): ``measured`` from ncu_source's per-SASS rows;
- static from the compiled kernel's PTX (``.loc file line col`` directives, event mode): ``from_ptx``;
- static from a SASS listing with line info (``nvdisasm -g`` / ``cuobjdump -sass`` of a -lineinfo cubin, its
  ``//## File "path", line N`` comments): ``from_sass_listing``.
A static model counts each instruction once as written; ``looped`` counts those inside a loop (a label some later
branch jumps back to), the ones a run repeats (a PTX integer division by a run-time value as the SASS sequence it
becomes: PTX_DIVISION_SASS).
"""

from __future__ import annotations

import ast
import linecache
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench.analysis import opcodes as oc

STATIC = "static (each instruction counted once as written)"
MEASURED = "ncu source counters (instructions executed, warp-state samples)"
# ncu's PC-sampling reason names -> the names of its per-issue stall ratios (kbench.analysis.ncu.STALL_REASONS)
REASON_NAMES = {"no_instructions": "no_instruction", "warpgroup_arrive": "gmma"}


@dataclass(frozen=True)
class Line:
    file: str
    line: int
    code: str  # the source text ("" where the source is not at hand)
    instructions: float  # executed (measured) or as written (static)
    opcodes: dict[str, float]  # opcode -> its instructions on this line
    samples: float | None = None  # warp-state samples (None: static)
    stalls: dict[str, float] = field(default_factory=dict)  # reason (ratio names) -> samples, "selected" excluded
    looped: float = 0.0  # static: instructions inside a loop body
    guards: tuple[str, ...] = ()  # the conditions naming constexpr flags of the `if` blocks it sits in
    written: dict[str, float] = field(default_factory=dict)  # measured: opcode -> its distinct SASS instructions on
    # the line that executed at least once

    @property
    def pipes(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for op, n in self.opcodes.items():
            _add(out, oc.pipe(op), n)
        return _ranked(out)

    @property
    def top_stall(self) -> str | None:
        return max(self.stalls, key=self.stalls.__getitem__) if self.stalls else None

    @property
    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}"

    @property
    def quoted(self) -> str:
        """``k.py:5 `code``` (the place alone where the source is not at hand)."""
        return f"{self.where} `{self.code}`" if self.code else self.where

    def opcode_words(self, most: int = 4) -> str:
        """Its commonest opcodes with their pipes: ``MUFU.EX2 x120 (special-function unit (XU)), FFMA x40 (...)``."""
        top = sorted(self.opcodes.items(), key=lambda kv: kv[1], reverse=True)[:most]
        return ", ".join(f"{op} x{n:.0f} ({oc.PIPE_WORDS[oc.pipe(op)]})" for op, n in top)


@dataclass(frozen=True)
class LineModel:
    kernel: str
    source: str  # MEASURED or STATIC
    lines: tuple[Line, ...]  # hottest first
    warps: float | None = None  # measured: the warps launched (the executions of the kernel's first instruction)

    def rounds(self, x: Line, keep: Callable[[str], bool]) -> float | None:
        """How many times each warp ran line ``x``'s instructions of the opcodes ``keep`` takes, on average: their
        executions over the instructions written and the warps launched (1: each ran once, none re-issued by a
        loop). None where the model counted no warps or the line has none of them."""
        written = sum(n for op, n in x.written.items() if keep(op))
        executed = sum(n for op, n in x.opcodes.items() if keep(op))
        return executed / written / self.warps if self.warps and written else None

    @property
    def static(self) -> bool:
        return self.source == STATIC

    @property
    def instructions(self) -> float:
        return sum(x.instructions for x in self.lines)

    @property
    def samples(self) -> float:
        return sum(x.samples or 0.0 for x in self.lines)

    @property
    def looped(self) -> float:
        return sum(x.looped for x in self.lines)

    def instruction_share(self, x: Line) -> float:
        return x.instructions / self.instructions if self.instructions else 0.0

    def sample_share(self, x: Line) -> float | None:
        return (x.samples or 0.0) / self.samples if self.samples else None

    def time_share(self, x: Line) -> float:
        """The share of the kernel's time the line holds: its share of the warp-state samples (each sample is one
        warp at one moment); without samples, of the instructions (executed, or static inside loops)."""
        if (s := self.sample_share(x)) is not None:
            return s
        if self.static:
            return x.looped / self.looped if self.looped else 0.0
        return self.instruction_share(x)

    @property
    def hottest(self) -> Line | None:
        """The hottest line of the source (instructions without line information are no line of it)."""
        return next((x for x in self.lines if x.line > 0), None)

    def carrying(self, reason: str, least: float = 0.2, most: int = 2) -> list[tuple[Line, float]]:
        """The lines holding at least ``least`` of the samples stalled on ``reason``, with that share."""
        total = sum(x.stalls.get(reason, 0.0) for x in self.lines)
        if total <= 0:
            return []
        placed = [x for x in self.lines if x.line > 0]
        ranked = sorted(placed, key=lambda x: x.stalls.get(reason, 0.0), reverse=True)[:most]
        return [(x, x.stalls[reason] / total) for x in ranked if x.stalls.get(reason, 0.0) / total >= least]


def _code(read: Callable[[str], list[str]], file: str, line: int) -> str:
    text = read(file)
    return text[line - 1].strip() if 0 < line <= len(text) else ""


FLAG = re.compile(r"\b[A-Z][A-Z0-9_]*\b")
CONDITION_CHARS = 200  # a guard's condition longer than this is not read (a capture's source is not trusted)


def guards(text: Sequence[str], line: int) -> tuple[str, ...]:
    """The conditions of the ``if`` blocks that hold line ``line`` of ``text`` and name an UPPER_CASE flag (a
    kernel's constexpr), innermost first, up to its ``def``; a line in an ``else`` or ``elif`` branch gets none of
    that block's (its condition false runs the line)."""
    if not 0 < line <= len(text) or not text[line - 1].strip():
        return ()
    found: list[str] = []
    depth = len(text[line - 1]) - len(text[line - 1].lstrip())
    branch = False  # inside an else/elif branch of the block met next
    for raw in (text[i] for i in range(line - 2, -1, -1)):  # the lines above it, nearest first
        code = raw.split("#", 1)[0].strip()  # a condition's trailing comment is not part of it
        indent = len(raw) - len(raw.lstrip())
        if not code or indent >= depth:
            continue
        depth = indent
        if code.startswith("def "):
            break
        if code.startswith(("else", "elif ")):
            branch = True
            depth += 1  # the block it belongs to is at this same indentation
        elif code.startswith(("if ", "for ", "while ", "with ", "try", "if(")):
            condition = code[3:-1].strip() if code.startswith("if ") and code.endswith(":") else ""
            if not branch and FLAG.search(condition) and len(condition) <= CONDITION_CHARS:
                found.append(condition)
            branch = False  # a loop's else, or a condition over several lines: that block's names are not taken
        if depth == 0:
            break
    return tuple(found)


def holds(condition: str, config: Mapping[str, object]) -> bool | None:
    """``condition`` (a guard) evaluated over a launch configuration's values, read as a syntax tree, never run:
    names, ``not``, ``and``, ``or``, comparisons of names and constants; None where it names anything else."""
    if len(condition) > CONDITION_CHARS:
        return None
    try:
        tree = ast.parse(condition, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None

    def value(node: ast.AST) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name) and node.id in config:
            return config[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not value(node.operand)
        if isinstance(node, ast.BoolOp):
            parts = [bool(value(v)) for v in node.values]
            return all(parts) if isinstance(node.op, ast.And) else any(parts)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            same = value(node.left) == value(node.comparators[0])
            return same if isinstance(node.ops[0], ast.Eq) else not same
        raise LookupError(ast.dump(node))

    try:
        return bool(value(tree))
    except (LookupError, TypeError, ValueError, RecursionError):
        return None


def read_source(file: str) -> list[str]:
    """A source file's lines: in a live run the very text compiled (plan.sources puts it in linecache), else the
    file on this machine, none where it is not here."""
    return linecache.getlines(file)


@dataclass
class _Sum:
    instructions: float = 0.0
    samples: float = 0.0
    opcodes: dict[str, float] = field(default_factory=dict)
    stalls: dict[str, float] = field(default_factory=dict)
    written: dict[str, float] = field(default_factory=dict)


def _add(into: dict[str, float], key: str, n: float) -> None:
    into[key] = into.get(key, 0.0) + n


def _ranked(counts: dict[str, float]) -> dict[str, float]:
    return dict(sorted(counts.items(), key=lambda kv: kv[1], reverse=True))


def measured(kernel: str, rows: Iterable[Mapping[str, Any]], sources: Mapping[str, list[str]]) -> LineModel:
    """From ncu_source.sass_rows (with SASS text and per-reason ``stalls``, in address order: the first is the
    kernel's entry, which every warp runs once) and the report's source files."""
    acc: dict[tuple[str, int], _Sum] = {}
    warps: float | None = None
    for r in rows:
        a = acc.setdefault((str(r["file"]), int(r["line"])), _Sum())
        executed = float(r["inst_executed"])
        warps = executed if warps is None else warps
        a.instructions += executed
        a.samples += float(r["stall_samples"])
        if r.get("sass"):
            _add(a.opcodes, oc.sass_opcode(str(r["sass"])), executed)
            if executed > 0:
                _add(a.written, oc.sass_opcode(str(r["sass"])), 1.0)
        for reason, n in (r.get("stalls") or {}).items():
            if reason != "selected":  # the warp that issued: time on the line, but no stall
                _add(a.stalls, REASON_NAMES.get(reason, reason), float(n))
    lines = [
        Line(file=f, line=n, code=_code(lambda p: list(sources.get(p, [])), f, n), instructions=a.instructions,
             opcodes=_ranked(a.opcodes), samples=a.samples, stalls=_ranked(a.stalls),
             guards=guards(sources.get(f, ()), n), written=a.written)
        for (f, n), a in acc.items()
    ]  # fmt: skip
    lines.sort(key=lambda x: (-(x.samples or 0.0), -x.instructions))
    return LineModel(kernel=kernel, source=MEASURED, lines=tuple(lines), warps=warps or None)


# SASS instructions one PTX integer division or remainder by a run-time value becomes, inside a loop: 104 SASS
# instructions for the 8 rem.s32 of divmod modulo's window_kernel (ncu source counters on the H100, 2026-11-27,
# tests/data/issue42_h100): the static model weighs them so, and counts every other instruction once
PTX_DIVISION_SASS = 13


def _weight(op: str) -> int:
    return PTX_DIVISION_SASS if oc.is_division({op: 1.0}) and op[:1].islower() else 1


def _static(
    kernel: str, placed: list[tuple[str, int, str]], loops: list[bool], read: Callable[[str], list[str]]
) -> LineModel:
    """One (file, line, opcode) per instruction and whether it lies in a loop -> the static model, lines most
    repeated first (``looped``: the loops' instructions, a PTX division weighed as its SASS sequence)."""
    ops: dict[tuple[str, int], dict[str, float]] = {}
    looped: dict[tuple[str, int], float] = {}
    for (file, line, op), loop in zip(placed, loops, strict=True):
        _add(ops.setdefault((file, line), {}), op, 1.0)
        looped[(file, line)] = looped.get((file, line), 0.0) + (_weight(op) if loop else 0.0)
    lines = [
        Line(file=f, line=n, code=_code(read, f, n), instructions=sum(c.values()), opcodes=_ranked(c),
             looped=looped[(f, n)])
        for (f, n), c in ops.items()
    ]  # fmt: skip
    lines.sort(key=lambda x: (-x.looped, -x.instructions))
    return LineModel(kernel=kernel, source=STATIC, lines=tuple(lines))


def _in_loops(labels: dict[str, int], jumps: list[tuple[int, str]], count: int) -> list[bool]:
    """Which of ``count`` instructions lie inside a loop: between a label and a later branch back to it (a branch
    to itself is the trap after a kernel's exit, not a loop)."""
    inside = [False] * count
    for at, target in jumps:
        start = labels.get(target)
        if start is not None and start < at:
            for i in range(start, at + 1):
                inside[i] = True
    return inside


_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', re.MULTILINE)
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+")
_PTX_LABEL = re.compile(r"^\s*(\$?[\w$]+):")
_PTX_INSTR = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)(.*)$")
_PTX_BRANCH = re.compile(r"^\s*(?:@!?%\w+\s+)?bra(?:\.uni)?\s+(\$?[\w$]+)\s*;")


def from_ptx(kernel: str, ptx: str, read: Callable[[str], list[str]] = read_source) -> LineModel:
    """The static per-line mix of a kernel's PTX: each instruction under the ``.loc`` before it."""
    files = {int(n): path for n, path in _PTX_FILE.findall(ptx)}
    body = ptx.split(".debug_", 1)[0]  # the DWARF sections after the code carry no instructions
    where: tuple[str, int] | None = None
    placed: list[tuple[str, int, str]] = []
    labels: dict[str, int] = {}
    jumps: list[tuple[int, str]] = []
    for raw in body.splitlines():
        text = raw.split("//", 1)[0]
        if m := _PTX_LOC.match(text):
            where = (files.get(int(m[1]), f"file {m[1]}"), int(m[2]))
        elif m := _PTX_LABEL.match(text):
            labels[m[1]] = len(placed)
        elif (m := _PTX_INSTR.match(text)) and where is not None and text.rstrip().endswith(";"):
            if b := _PTX_BRANCH.match(text):
                jumps.append((len(placed), b[1]))
            placed.append((*where, oc.ptx_opcode(m[1])))
    return _static(kernel, placed, _in_loops(labels, jumps, len(placed)), read)


_SASS_WHERE = re.compile(r'//##\s+File\s+"([^"]+)",\s+line\s+(\d+)(.*)$')
_SASS_INLINED = re.compile(r'inlined at\s+"([^"]+)",\s+line\s+(\d+)')
_SASS_INSTR = re.compile(r"/\*([0-9a-fA-F]+)\*/\s+(.+?)\s*;")
_SASS_LABEL = re.compile(r"^\s*(\.L_\w+):")
_SASS_TARGET = re.compile(r"`?\(?(\.L_\w+)\)?`?")


def from_sass_listing(kernel: str, text: str, read: Callable[[str], list[str]] = read_source) -> LineModel:
    """The static per-line mix of a SASS listing with line info (``nvdisasm -g``): each instruction under the
    ``//## File`` comment before it, an inlined frame under its outermost call site (the kernel's own line)."""
    where: tuple[str, int] | None = None
    placed: list[tuple[str, int, str]] = []
    labels: dict[str, int] = {}
    jumps: list[tuple[int, str]] = []
    for raw in text.splitlines():
        if m := _SASS_WHERE.search(raw):
            if m[1].startswith(".nv_debug"):
                continue  # the PTX line the instruction came from, not the source's
            calls = _SASS_INLINED.findall(m[3])
            where = (calls[-1][0], int(calls[-1][1])) if calls else (m[1], int(m[2]))
        elif m := _SASS_LABEL.match(raw):
            labels[m[1]] = len(placed)
        elif (m := _SASS_INSTR.search(raw)) and where is not None:
            op = oc.sass_opcode(m[2])
            if op.split(".")[0] in ("BRA", "BRX", "JMP") and (t := _SASS_TARGET.search(m[2].split(" ", 1)[-1])):
                jumps.append((len(placed), t[1]))
            placed.append((*where, op))
    return _static(kernel, placed, _in_loops(labels, jumps, len(placed)), read)


def compiled(folder: Path) -> list[LineModel]:
    """The static models of the kernels compiled for a stage (a run's compiled/<stage>/): from a SASS listing with
    line info where one lies beside the kernel (<kernel>.sass: ``nvdisasm -g`` of its cubin), else from its PTX."""
    out = []
    for ptx in sorted(folder.glob("*.ptx")):
        sass = ptx.with_suffix(".sass")
        if sass.is_file():
            out.append(from_sass_listing(ptx.stem, sass.read_text(errors="replace")))
        else:
            out.append(from_ptx(ptx.stem, ptx.read_text(errors="replace")))
    return [m for m in out if m.lines]
