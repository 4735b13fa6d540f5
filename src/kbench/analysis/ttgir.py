"""What the compiler chose, read from a Triton kernel's TTGIR (compiled/<stage>/<kernel>.ttgir). Pure.

The PTX says what is written, once per thread; the TTGIR says what one program (CTA) executes and how Triton laid it
out: an atomic whose result is a scalar (``f32``) runs once per program (Triton predicates it to one thread), one
whose result is a ``tensor<N x T>`` once per element (masked by its mask operand), each repeated by the enclosing
``scf.for`` loops; a dot's accumulator layout (``#ttg.nvidia_mma``: warps along M and N, the instruction's shape)
says whether its warps split the product or compute copies of it. Where a pointer comes from (a kernel argument, the
program id, the lanes, a loop, loaded data) says whether every program's atomics meet at one address.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kbench.model import Model

_DEF = re.compile(r"^(%[\w$.-]+)(?::\d+)?\s*=\s*\"?([\w.]+)\"?(.*)$")
_VALUE = re.compile(r"%[\w$.-]+")
_LOC_DEF = re.compile(r"^(#loc\d*)\s*=\s*(.*)$")
_FILE_LINE = re.compile(r"\"([^\"]+)\":(\d+):\d+")
_LAYOUT_DEF = re.compile(r"^(#[\w]+)\s*=\s*#[\w]+\.([\w]+)<\{(.*)\}>")
_FOR = re.compile(r"scf\.for\s+(%[\w$.-]+)\s*=\s*(%[\w$.-]+)\s+to\s+(%[\w$.-]+)\s+step\s+(%[\w$.-]+)")
_ITER_ARGS = re.compile(r"iter_args\((.*?)\)\s*->")
_TENSOR = re.compile(r"tensor<([\dx]+)x[^,>]+(?:,\s*(#[\w]+|#ttg\.dot_op<\{[^}]*\}>))?")
_INT_CONST = re.compile(r"arith\.constant\s+(-?\d+)\s*:")
_CALLSITE = re.compile(r"loc\(callsite\((#loc\d*) at (#loc\d*)\)\)")
_LOC_REF = re.compile(r"#loc\d*")
MAX_LOC_DEPTH = 32  # inlined calls nest a loc 7 deep in the deepest kernel we have seen (Gluon MLA decode)

# where a value comes from, as the leaves of its definitions: what makes a pointer differ between programs or lanes
UNIFORM = frozenset({"argument", "constant"})


class AtomicOp(Model):
    """One tl.atomic_* call as the compiled kernel executes it, per program."""

    op: str  # the read-modify-write (fadd, max, umin, exch, ...) or "cas"
    line: str  # the kernel's source line, file:line
    scalar: bool  # a scalar atomic: once per program (one thread); else once per element of a block
    elements: int  # atomics per program per execution: 1 for a scalar, the block's size for a tensor
    masked: bool  # a mask that is not constant true, or inside an scf.if: ``elements`` is the most it runs
    trips: int | None  # times the enclosing loops run it (1 outside any loop; None: a loop bound not constant)
    address: list[str]  # what its pointer depends on: [] for one address every program shares; else of "program",
    # "lanes", "loop", "data" (an address loaded from memory), "other"
    lowered: int = 1  # TTGIR ops the call became (a float max/min: a signed max and an unsigned min, exclusive masks)

    @property
    def per_program(self) -> int | None:
        """Atomics one program executes (at most, where masked); None where a loop's trip count is not known."""
        return None if self.trips is None else self.elements * self.trips

    @property
    def one_address(self) -> bool:
        return not self.address


class DotOp(Model):
    """One tl.dot as compiled: its shape per program, its accumulator layout, and where its A operand lives."""

    m: int
    n: int
    k: int
    line: str
    version: int | None  # the MMA layout's major version: 3 warpgroup MMA (wgmma), 2 warp-level mma.sync
    warps: list[int]  # warpsPerCTA of the accumulator layout, [along M, along N]
    instr: list[int]  # instrShape: rows and columns one warp's instruction covers (wgmma: 16 rows a warp)
    a_registers: bool  # A read from registers (a dot_op layout: often another dot's result), else shared memory
    trips: int | None  # times the enclosing loops run it

    @property
    def copies(self) -> int:
        """How many times the CTA computes the product: its warps along M cover more rows than it has (a warpgroup
        MMA takes 64 rows, 16 a warp; a warp-level one 16), and the warps beyond them hold copies of the same tile
        (each warpgroup computes it whole); likewise along N. A tile under one instruction's rows is padding, not a
        copy."""
        if len(self.warps) < 2 or len(self.instr) < 2 or not self.m or not self.n:
            return 1
        unit = 4 * self.instr[0] if self.version == 3 else self.instr[0]  # rows one warpgroup (warp) covers
        along_m = max(1, self.warps[0] * self.instr[0] // max(self.m, unit))
        along_n = max(1, self.warps[1] * self.instr[1] // max(self.n, self.instr[1]))
        return along_m * along_n

    @property
    def flops(self) -> float:
        """The product's FLOPs per program (a trip count not known counts once)."""
        return 2.0 * self.m * self.n * self.k * (self.trips or 1)


@dataclass
class _Ir:
    """The TTGIR's definitions: what defines each value, the constants, and the loops each line sits in."""

    defs: dict[str, tuple[str, list[str]]] = field(default_factory=dict)  # value -> (op, operand values)
    consts: dict[str, int] = field(default_factory=dict)
    compares: dict[str, str] = field(default_factory=dict)  # value -> its arith.cmpi predicate (eq, ne, slt, ...)
    locs: dict[str, str] = field(default_factory=dict)
    layouts: dict[str, tuple[str, str]] = field(default_factory=dict)  # #name -> (kind, body)
    lines: list[tuple[str, tuple[int | None, ...]]] = field(default_factory=list)  # (line, trips of its loops)
    conditional: set[int] = field(default_factory=set)  # indices of ``lines`` inside an scf.if: they may not run
    resolved: dict[str, str | None] | None = None  # each loc alias's file:line, once the first op asks


def _clean(line: str) -> str:
    """``line`` without the ``loc(...)`` that ends it (one level of parentheses inside, as MLIR prints a location),
    found by one scan back from its end: a regular expression here took time quadratic in a run of spaces (a 100 KB
    line of them: 69 s)."""
    text = line.strip()
    if not text.endswith(")"):
        return text
    depth = 0
    for j in range(len(text) - 1, -1, -1):
        if text[j] == ")":
            depth += 1
            if depth > 2:  # deeper than a location nests: not one
                return text
        elif text[j] == "(":
            depth -= 1
            if depth == 0:
                return text[: j - 3].rstrip() if j >= 3 and text[j - 3 : j] == "loc" else text
    return text


def _parse(text: str) -> _Ir:
    ir = _Ir()
    frames: list[int | str | None] = []  # per open region: a loop's trips (int / None), "if", or "" for any other
    for raw in text.splitlines():
        line = raw.strip()
        if m := _LOC_DEF.match(line):
            ir.locs[m[1]] = m[2]
            continue
        if m := _LAYOUT_DEF.match(line):
            ir.layouts[m[1]] = (m[2], m[3])
            continue
        if line.startswith("tt.func"):
            for arg in re.findall(r"(%[\w$.-]+):", line):
                ir.defs[arg] = ("argument", [])
        if line.startswith("}") and frames:
            frames.pop()
        if line.startswith("^bb"):
            for arg in re.findall(r"(%[\w$.-]+):", line):
                ir.defs[arg] = ("block", [])
        body = _clean(line)
        if (loop := _FOR.search(body)) is not None:
            ir.defs[loop[1]] = ("loop", [])
            if (it := _ITER_ARGS.search(body)) is not None:
                for carried in re.findall(r"(%[\w$.-]+)\s*=", it[1]):
                    ir.defs[carried] = ("loop", [])
        if m := _DEF.match(body):
            name, op, rest = m.groups()
            if loop is not None:
                ir.defs[name] = ("loop", [])
            else:
                ir.defs[name] = (op, [v.split("#")[0] for v in _VALUE.findall(rest)])
            if op == "arith.cmpi":
                ir.compares[name] = rest.split(",", 1)[0].strip()
            if (c := _INT_CONST.search(body)) is not None and op == "arith.constant":
                ir.consts[name] = int(c[1])
            elif op == "arith.constant" and re.search(r"arith\.constant\s+(true|dense<true>)", body):
                ir.consts[name] = 1
        if "if" in frames:
            ir.conditional.add(len(ir.lines))
        ir.lines.append((raw, tuple(f for f in frames if not isinstance(f, str))))
        if body.endswith("{") and not body.startswith("}"):
            frames.append(_trips(ir, loop.groups()[1:]) if loop is not None else "if" if "scf.if" in body else "")
        elif body.endswith("{"):  # "} else {": the region closed above, another opens
            frames.append("if")
    return ir


def _trips(ir: _Ir, bounds: tuple[str, ...]) -> int | None:
    lb, ub, step = (ir.consts.get(v) for v in bounds)
    if lb is None or ub is None or not step:
        return None
    return max(0, -(-(ub - lb) // step))


def _sources(ir: _Ir, value: str, seen: dict[str, frozenset[str]]) -> frozenset[str]:
    """The leaves a value is computed from: argument, constant, program, lanes, loop, data, other."""
    if value in seen:
        return seen[value]
    seen[value] = frozenset({"other"})  # a cycle (none in SSA outside regions) reads as unknown
    op, operands = ir.defs.get(value, ("other", []))
    leaf = {
        "argument": "argument",
        "arith.constant": "constant",
        "tt.get_program_id": "program",
        "tt.get_num_programs": "constant",
        "tt.make_range": "lanes",
        "loop": "loop",
        "tt.load": "data",
        "block": "other",
    }
    if op in leaf:
        found = frozenset({leaf[op]})
    elif not operands:
        found = frozenset({"other"})
    else:
        found = frozenset().union(*(_sources(ir, v, seen) for v in operands))
    seen[value] = found
    return found


def _loc_node(text: str) -> tuple[str | None, tuple[str, ...]]:
    """One loc definition: its own file:line, or the aliases it refers to (an inlined call's callee and call site; a
    named location's one)."""
    if (call := _CALLSITE.match(text)) is not None:
        return None, (call[1], call[2])
    if (f := _FILE_LINE.search(text)) is not None:
        path = f[1]
        return (
            f"triton/{path.rsplit('/', 1)[-1]}:{f[2]}" if "/triton/" in path else f"{path.rsplit('/', 1)[-1]}:{f[2]}"
        ), ()
    nxt = _LOC_REF.search(text)
    return None, (nxt[0],) if nxt else ()


def resolve_locs(locs: dict[str, str]) -> dict[str, str | None]:
    """Every loc alias's file:line: an inlined call's own line (the callee), or its call site where the callee is
    Triton's library (tl.sum's body is not the user's line). Each alias is resolved once, after the aliases it refers
    to (Kahn's order), so the work grows with the file: an alias whose references loop back to it or to a loop (a
    hostile file's ``#loc1 = loc(callsite(#loc1 at #loc1))``), or nest deeper than MAX_LOC_DEPTH, resolves to None."""
    nodes = {name: _loc_node(text) for name, text in locs.items()}
    waiting = {name: {ref for ref in refs if ref in nodes} for name, (_, refs) in nodes.items()}
    users: dict[str, list[str]] = {}
    for name, pending in waiting.items():
        for ref in pending:
            users.setdefault(ref, []).append(name)
    ready = deque(name for name, pending in waiting.items() if not pending)
    found: dict[str, str | None] = {}
    depth: dict[str, int] = {}
    while ready:
        name = ready.popleft()
        own, refs = nodes[name]
        depth[name] = 1 + max((depth.get(ref, 0) for ref in refs), default=-1)
        lines = [found.get(ref) for ref in refs]
        if depth[name] > MAX_LOC_DEPTH:
            found[name] = None
        elif len(lines) == 2:  # callsite(callee at caller)
            callee, caller = lines
            found[name] = callee if callee is not None and not callee.startswith("triton/") else caller
        else:
            found[name] = lines[0] if lines else own
        for user in users.get(name, ()):
            waiting[user].discard(name)
            if not waiting[user]:
                ready.append(user)
    return {name: found.get(name) for name in nodes}  # never ready: on a loop or behind one


def _line(ir: _Ir, raw: str) -> str:
    """The source line (file:line) of an op, through its loc reference."""
    m = re.search(r"loc\((#loc\d*)\)\s*$", raw.strip())
    if ir.resolved is None:
        ir.resolved = resolve_locs(ir.locs)
    return (ir.resolved.get(m[1]) if m else None) or "?"


def _elements(result_type: str) -> int:
    m = _TENSOR.search(result_type)
    return math.prod(int(d) for d in m[1].split("x")) if m else 1


def _product(trips: tuple[int | None, ...]) -> int | None:
    return None if any(t is None for t in trips) else math.prod(t for t in trips if t is not None)


# arith.cmpi predicates that are each other's negation: two ops masked by such a pair on the same operands run one
NEGATION = {"eq": "ne", "ne": "eq", "slt": "sge", "sge": "slt", "sgt": "sle", "sle": "sgt", "ult": "uge", "uge": "ult",
            "ugt": "ule", "ule": "ugt"}  # fmt: skip


def _exclusive(ir: _Ir, a: str | None, b: str | None) -> bool:
    """Two masks that are each other's negation (a float max lowered to a signed max and an unsigned min)."""
    if a is None or b is None or a not in ir.compares or b not in ir.compares:
        return False
    return NEGATION.get(ir.compares[a]) == ir.compares[b] and ir.defs[a][1] == ir.defs[b][1]


def atomics(text: str) -> list[AtomicOp]:
    """Every tl.atomic_* call of the kernel, as one program executes it."""
    ir, seen = _parse(text), dict[str, frozenset[str]]()
    found: dict[tuple[str, str], AtomicOp] = {}
    masks: dict[tuple[str, str], str | None] = {}
    for index, (raw, trips) in enumerate(ir.lines):
        body = _clean(raw)
        m = re.search(r"tt\.atomic_(rmw|cas)\s+(.*)$", body)
        if m is None:
            continue
        args = m[2].split(" : ", 1)
        values = [v.split("#")[0] for v in _VALUE.findall(args[0])]
        words = [w.strip() for w in args[0].split(",")]
        op = words[0] if m[1] == "rmw" else "cas"
        if not values:
            continue
        pointer = values[0]
        mask = values[2] if m[1] == "rmw" and len(values) > 2 else None
        result = args[1].rsplit("->", 1)[-1] if len(args) > 1 else ""
        where = _line(ir, raw)
        src = _sources(ir, pointer, seen)
        atom = AtomicOp(
            op=op,
            line=where,
            scalar="tensor<" not in result,
            elements=_elements(result),
            masked=(mask is not None and ir.consts.get(mask) != 1) or index in ir.conditional,
            trips=_product(trips),
            address=sorted(src - UNIFORM),
        )
        key = (where, pointer)
        if key in found:  # one call lowered to several ops on one pointer under exclusive masks: one executes
            first = found[key]
            masked = first.masked and not _exclusive(ir, masks[key], mask)
            atom = first.model_copy(update={"lowered": first.lowered + 1, "op": f"{first.op}/{op}", "masked": masked})
        found[key] = atom
        masks[key] = mask
    return list(found.values())


def _layout(ir: _Ir, name: str) -> tuple[int | None, list[int], list[int]] | None:
    kind, body = ir.layouts.get(name, ("", ""))
    if "mma" not in kind:
        return None
    version = re.search(r"versionMajor\s*=\s*(\d+)", body)
    warps = re.search(r"warpsPerCTA\s*=\s*\[([\d,\s]+)\]", body)
    instr = re.search(r"instrShape\s*=\s*\[([\d,\s]+)\]", body)

    def ints(m: re.Match[str] | None) -> list[int]:
        return [int(x) for x in m[1].split(",")] if m else []

    return (int(version[1]) if version else None), ints(warps), ints(instr)


def dots(text: str) -> list[DotOp]:
    """Every tl.dot of the kernel with its accumulator's layout (tt.dot, or ttng.warp_group_dot on Hopper)."""
    ir = _parse(text)
    out = []
    for raw, trips in ir.lines:
        body = _clean(raw)
        if not re.search(r"=\s*(tt\.dot|\w+\.warp_group_dot)\s", body):  # ttng. or triton_nvidia_gpu.
            continue
        types = body.split(" : ", 1)[-1]
        operands, _, result = types.rpartition("->")
        a_type = operands.split(" * ", 1)[0]
        r = _TENSOR.search(result)
        a = re.search(r"<(\d+)x(\d+)x", a_type)
        if r is None or a is None or r[2] is None:
            continue
        m_n = [int(d) for d in r[1].split("x")]
        layout = _layout(ir, r[2])
        if layout is None or len(m_n) != 2:
            continue
        version, warps, instr = layout
        out.append(
            DotOp(
                m=m_n[0],
                n=m_n[1],
                k=int(a[2]),
                line=_line(ir, raw),
                version=version,
                warps=warps,
                instr=instr,
                a_registers="dot_op" in a_type,
                trips=_product(trips),
            )
        )
    return out


_WS_REGS = re.compile(r"ttg\.warp_specialize\(.*requestedRegisters = array<i32: ([\d, ]+)>")
_WS_PARTITION = re.compile(r"^\s*partition\d+\(.*\)\s*num_warps\((\d+)\)", re.MULTILINE)
_MODULE_WARPS = re.compile(r'"ttg\.num-warps" = (\d+)')


_BARRIER = re.compile(r"^(gpu\.barrier|ttg\.barrier)\b")  # tl.debug_barrier (Triton 3.6: gpu., 3.9: ttg.)


def loop_barriers(text: str) -> list[str]:
    """The source lines (file:line) of the CTA barriers inside a loop (tl.debug_barrier): Triton's software pipeliner
    leaves a loop holding one unpipelined, whatever num_stages asks."""
    ir = _parse(text)
    found = (_line(ir, raw) for raw, trips in ir.lines if trips and _BARRIER.match(_clean(raw)))
    return list(dict.fromkeys(found))


def partitions(ttgir: str) -> dict[str, Any] | None:
    """A warp-specialized kernel's partitions (Gluon's gl.warp_specialize, Triton's warp_specialize loops): the
    default partition's warps (the module's num-warps) and each worker's warps and requested registers; None where
    the kernel has no warp-specialized region."""
    workers = [int(n) for n in _WS_PARTITION.findall(ttgir)]
    if "ttg.warp_specialize" not in ttgir or not workers:
        return None
    regs = _WS_REGS.search(ttgir)
    requested = [int(r) for r in regs[1].split(",")] if regs else []
    default = _MODULE_WARPS.search(ttgir)
    return {
        "default_warps": int(default[1]) if default else None,
        "workers": [
            {"warps": w, "registers": requested[i] if i < len(requested) else None} for i, w in enumerate(workers)
        ],
    }


def partition_warps(parts: dict[str, Any] | None) -> tuple[int, ...]:
    """Each partition's warps, the default partition's first; () for a kernel without partitions."""
    if not parts or parts.get("default_warps") is None:
        return ()
    return (int(parts["default_warps"]), *(int(w.get("warps") or 0) for w in parts.get("workers", [])))


def idle_warps(partitioned: tuple[int, ...], launched: object) -> int | None:
    """Warps a warp-specialized kernel launches that belong to no partition (Triton launches whole warpgroups: 4 +
    4 + 1 partition warps run as 12), which wait at a barrier for the kernel's whole run; None where not known
    (``partitioned``: each partition's warps, as ``partition_warps`` gives them)."""
    if not partitioned or not isinstance(launched, int):
        return None
    return max(0, launched - sum(partitioned))


def compiled_facts(ttgir: object) -> dict[str, Any]:
    """The TTGIR's facts for the tiling record: its atomics, its dots, its warp-specialized partitions and the barriers
    inside its loops (None each where there is no TTGIR; partitions None where there are none)."""
    if not isinstance(ttgir, str):
        return {"atomics": None, "dots": None, "partitions": None, "loop_barriers": None}
    return {
        "atomics": [a.model_dump(mode="json") for a in atomics(ttgir)],
        "dots": [d.model_dump(mode="json") for d in dots(ttgir)],
        "partitions": partitions(ttgir),
        "loop_barriers": loop_barriers(ttgir),
    }
