"""The instruction mix of a compiled kernel, read from its PTX (every run keeps it in compiled/<stage>/). Pure.

What event mode, which reads no counters, can know of a kernel's code:
- its tensor-core instructions: warpgroup ``wgmma.mma_async`` or warp-level ``mma.sync``, shape, operand precision;
- how it moves global memory: loads and stores by bytes per thread, ``cp.async`` copies into shared memory, TMA
  bulk tensor copies;
- local memory (local arrays only: ptxas spills registers after PTX, which Triton's n_spills counts);
- atomics, float conversions, FP32 and packed half-precision math, special functions and barriers.
The counts are static: each instruction as it stands in the PTX, once, however often a loop repeats it.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Callable

from kbench.model import Model

# PTX operand types and their size in bytes (.f16x2 / .bf16x2 are packed pairs)
TYPE_BYTES = {
    **{f"{k}{n}": n // 8 for k in "bsuf" for n in (8, 16, 32, 64)},
    "f16x2": 4,
    "bf16": 2,
    "bf16x2": 4,
    "tf32": 4,
    "e4m3": 1,
    "e5m2": 1,
}
# a tensor instruction's operand type -> the precision a plan declares (kbench.plan.base.Precision)
OPERAND_PRECISION = {"bf16": "bf16", "f16": "fp16", "tf32": "tf32", "e4m3": "fp8", "e5m2": "fp8", "s8": "int8",
                     "u8": "int8", "f64": "fp64"}  # fmt: skip

_INSTR = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)", re.MULTILINE)
# a wgmma's operands after its accumulator list: "{...}, {" (A in registers) or "{...}, %rd" (A's shared descriptor)
_WGMMA_A = re.compile(r"^\s*(?:@!?%\w+\s+)?(wgmma\.mma_async[\w.:]*)\s+\{[^}]*\},\s*(\{|%)", re.MULTILINE)
_CP_SIZE = re.compile(
    r"cp\.async\.c[ag]\.shared(?:::\w+)?\.global[\w.:]*\s+\[[^]]*\],\s*\[[^]]*\],\s*(0x[0-9a-f]+|\d+)"
)
_FLOAT_CVT = re.compile(r"^cvt\.(?:\w+\.)*(?:f16|bf16|f32|f64|tf32|e4m3|e5m2)\w*\.(?:f16|bf16|f32|f64|e4m3|e5m2)")


# bytes of one tensor-instruction operand element, by the precision a plan declares
OPERAND_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4, "fp8": 1, "int8": 1, "fp64": 8}


class TensorOp(Model):
    op: str  # "wgmma" (Hopper warpgroup MMA) or "mma" (warp-level mma.sync)
    shape: str  # e.g. m64n256k16
    types: str  # accumulator and operand types as PTX spells them, e.g. f32.bf16.bf16
    count: int
    a_from: str = ""  # wgmma's A operand: "shared" (a descriptor) or "registers"; "" for mma.sync or not read

    @property
    def precision(self) -> str | None:
        return precision(self.types)

    @property
    def dims(self) -> tuple[int, int, int] | None:
        """(M, N, K) of its shape (m64n256k16 -> (64, 256, 16))."""
        m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", self.shape)
        return (int(m[1]), int(m[2]), int(m[3])) if m else None


class InstructionMix(Model):
    """A kernel's PTX instructions by class (static counts)."""

    tensor_ops: list[TensorOp]
    operand_precision: str | None  # of the tensor instructions (None: none, or more than one precision)
    global_loads: dict[int, int]  # bytes per thread per instruction -> ld.global instructions
    global_stores: dict[int, int]
    cp_async: dict[int, int]  # bytes per thread per copy -> cp.async global -> shared copies
    tma_loads: int  # cp.async.bulk.tensor global -> shared (the Tensor Memory Accelerator)
    tma_stores: int
    local: int  # ld.local / st.local in the PTX: local arrays (ptxas's register spills come later, not here)
    atomics: int  # atom / red on global memory, as written (each thread runs each once, where not predicated)
    one_thread_atomics: int = 0  # of which predicated to one thread of the CTA (a scalar atomic: once a program)
    shared_atomics: int
    float_conversions: int  # cvt between float types (precision changes)
    fp32_math: int  # fma / mul / add .f32
    fp64_math: int = 0  # fma / mul / add / div .f64 (the FP64 pipe: half the FP32 rate on an H100, far less elsewhere)
    half_math: int  # packed f16x2 / bf16x2 fma / mul / add
    special: int  # ex2 / lg2 / rcp / rsqrt / sqrt / sin / cos (the special-function unit)
    barriers: int  # bar.sync / barrier.sync
    mbarrier_waits: int = 0  # mbarrier.try_wait / test_wait: where warps wait for TMA copies or other warps (Gluon)

    @property
    def tensor_cores(self) -> bool:
        return bool(self.tensor_ops)

    def line(self) -> str:
        """One line for the report: tensor instructions, how global memory moves, and what else stands out."""

        def widths(counts: dict[int, int]) -> str:
            return ", ".join(f"{w} B x{n}" for w, n in counts.items())

        tensor = ", ".join(
            f"{o.op} {o.shape} {o.types} x{o.count}"
            + (f" (A from {'shared memory' if o.a_from == 'shared' else o.a_from})" if o.a_from else "")
            for o in self.tensor_ops
        )
        parts = [tensor or "no tensor-core instruction"]
        loads = [f"ld {widths(self.global_loads)}"] if self.global_loads else []
        loads += [f"cp.async {widths(self.cp_async)}"] if self.cp_async else []
        loads += [f"TMA x{self.tma_loads}"] if self.tma_loads else []
        stores = [f"st {widths(self.global_stores)}"] if self.global_stores else []
        stores += [f"TMA x{self.tma_stores}"] if self.tma_stores else []
        parts += [f"global loads: {', '.join(loads)}"] if loads else []
        parts += [f"global stores: {', '.join(stores)}"] if stores else []
        others = {
            "local-memory access": self.local,
            "global atomic": self.atomics,
            "shared atomic": self.shared_atomics,
            "float conversion": self.float_conversions,
            "FP64 instruction": self.fp64_math,
            "special-function instruction": self.special,
            "mbarrier wait": self.mbarrier_waits,
        }
        plural = {"local-memory access": "local-memory accesses"}
        parts += [f"{n} {what if n == 1 else plural.get(what, what + 's')}" for what, n in others.items() if n]
        if self.one_thread_atomics:  # a scalar atomic: once per CTA, not once per thread
            at = next(i for i, p in enumerate(parts) if p.endswith(("global atomic", "global atomics")))
            parts[at] += f" ({self.one_thread_atomics} predicated to one thread)"
        return "; ".join(parts)


def _width(qualifiers: list[str]) -> int | None:
    """Bytes per thread of an ld/st: its vector count times its element type's size."""
    vec = next((int(q[1:]) for q in qualifiers if re.fullmatch(r"v\d", q)), 1)
    size = next((TYPE_BYTES[q] for q in reversed(qualifiers) if q in TYPE_BYTES), None)
    return None if size is None else vec * size


def _tensor_op(name: str) -> tuple[str, str, str] | None:
    """(op, shape, types) of a tensor-core instruction's name; None for any other."""
    parts = name.split(".")
    if parts[0] == "wgmma" and len(parts) > 1 and parts[1] == "mma_async":
        op = "wgmma"
    elif parts[0] == "mma" and "sync" in parts:
        op = "mma"
    else:
        return None
    shape = next((p for p in parts if re.fullmatch(r"m\d+n\d+k\d+", p)), "")
    after = parts[parts.index(shape) + 1 :] if shape else []
    types = ".".join(p for p in after if p in TYPE_BYTES)
    return op, shape, types


def precision(types: str) -> str | None:
    """The precision of a tensor instruction's A and B operands from its types, written D.A.B (wgmma) or D.A.B.C
    (mma.sync): f32.bf16.bf16 -> bf16; None where A and B differ or are not known."""
    found = {OPERAND_PRECISION.get(t) for t in types.split(".")[1:3]}
    return found.pop() if len(found) == 1 else None


_DEF = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.]*)\s+(%\w+)\s*,\s*([^;]*);", re.MULTILINE)
_PREDICATED_ATOM = re.compile(r"^\s*@(%\w+)\s+(?:atom|red)\.global", re.MULTILINE)


# integer ops on the thread index a predicate is built from, per thread (values as Python ints, 32-bit)
_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "shr": operator.rshift,
    "shl": lambda a, b: (a << b) & 0xFFFFFFFF,
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
}
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    name: getattr(operator, name) for name in ("eq", "ne", "lt", "le", "gt", "ge")
}


def one_thread_atomics(ptx: str) -> int:
    """Global atomics predicated to at most one thread of the CTA (how Triton emits a scalar atomic: once per program,
    not once per thread). Each ``@%p atom`` predicate is evaluated for every thread of the CTA (``.reqntid``) through
    the integer ops it is built from on %tid.x; a value that depends on anything else (a parameter, loaded data) may
    be true in any thread, so only a predicate the thread index alone narrows to one thread counts."""
    ntid = re.search(r"\.reqntid\s+(\d+)", ptx)
    if ntid is None:
        return 0
    threads = range(int(ntid[1]))
    defs = {dst: (op, [t.strip() for t in rest.split(",")]) for op, dst, rest in _DEF.findall(ptx)}
    memo: dict[str, list[int] | None] = {}

    def value(arg: str, depth: int = 0) -> list[int] | None:
        """The operand's value in each thread; None where it depends on more than the thread index."""
        if arg.lstrip("-").isdigit():
            return [int(arg)] * len(threads)
        if arg == "%tid.x":
            return list(threads)
        if arg in memo or depth > 16:
            return memo.get(arg)
        op, args = defs.get(arg, ("", []))
        head = op.split(".")[0]
        out: list[int] | None = None
        if op in ("and.pred", "or.pred") and len(args) == 2:
            a, b = value(args[0], depth + 1), value(args[1], depth + 1)
            if op == "and.pred":  # false wherever a known side is false
                known = [v for v in (a, b) if v is not None]
                out = [int(all(v[t] for v in known)) for t in threads] if known else None
            else:
                out = None if a is None or b is None else [x | y for x, y in zip(a, b, strict=True)]
        elif head in ("mov", "cvt") and len(args) == 1:
            out = value(args[0], depth + 1)
        elif head in _INT_OPS and len(args) == 2:
            a, b = value(args[0], depth + 1), value(args[1], depth + 1)
            out = None if a is None or b is None else [_INT_OPS[head](x, y) for x, y in zip(a, b, strict=True)]
        elif head == "setp" and len(args) == 2 and op.split(".")[1] in _COMPARE:
            a, b = value(args[0], depth + 1), value(args[1], depth + 1)
            test = _COMPARE[op.split(".")[1]]
            out = None if a is None or b is None else [int(test(x, y)) for x, y in zip(a, b, strict=True)]
        memo[arg] = out
        return out

    found = 0
    for pred in _PREDICATED_ATOM.findall(ptx):
        where = value(pred)
        found += where is not None and sum(1 for v in where if v) <= 1
    return found


def instruction_mix(ptx: str) -> InstructionMix:
    names = [m.group(1) for m in _INSTR.finditer(ptx) if not m.group(1).startswith(".")]
    tensor: Counter[tuple[str, str, str]] = Counter()
    loads: Counter[int] = Counter()
    stores: Counter[int] = Counter()
    counts: Counter[str] = Counter()
    for name in names:
        parts = name.split(".")
        head = parts[0]
        if (t := _tensor_op(name)) is not None:
            tensor[t] += 1
        elif head in ("ld", "st") and len(parts) > 1 and parts[1] == "global":
            width = _width(parts[2:])
            if width is not None:
                (loads if head == "ld" else stores)[width] += 1
        elif head in ("ld", "st") and len(parts) > 1 and parts[1] == "local":
            counts["local"] += 1
        elif name.startswith("cp.async.bulk.tensor"):
            counts["tma_stores" if ".global.shared" in name else "tma_loads"] += 1
        elif head in ("atom", "red"):
            counts["shared_atomics" if ".shared" in name else "atomics"] += 1
        elif _FLOAT_CVT.match(name):
            counts["float_conversions"] += 1
        elif head in ("fma", "mul", "add", "sub") and parts[-1] == "f32":
            counts["fp32_math"] += 1
        elif head in ("fma", "mul", "add", "sub", "div", "rcp", "sqrt") and parts[-1] == "f64":
            counts["fp64_math"] += 1
        elif head in ("fma", "mul", "add", "sub") and parts[-1] in ("f16x2", "bf16x2"):
            counts["half_math"] += 1
        elif head in ("ex2", "lg2", "rcp", "rsqrt", "sqrt", "sin", "cos", "tanh"):
            counts["special"] += 1
        elif head in ("bar", "barrier"):
            counts["barriers"] += 1
        elif head == "mbarrier" and len(parts) > 1 and parts[1] in ("try_wait", "test_wait"):
            counts["mbarrier_waits"] += 1
    counts["one_thread_atomics"] = one_thread_atomics(ptx)
    copies = Counter(int(size, 0) for size in _CP_SIZE.findall(ptx))
    # where each wgmma reads A, counted per source: one shape may do both (Q from shared memory, P from registers)
    sources: Counter[tuple[tuple[str, str, str] | None, str]] = Counter(
        (_tensor_op(name), "registers" if brace == "{" else "shared") for name, brace in _WGMMA_A.findall(ptx)
    )
    ops: list[TensorOp] = []
    for kind, n in sorted(tensor.items()):
        split = {src: k for (key, src), k in sources.items() if key == kind}
        if sum(split.values()) != n:  # not every instruction's A operand was read: no source said
            split = {"": n}
        ops += [
            TensorOp(op=kind[0], shape=kind[1], types=kind[2], count=k, a_from=src) for src, k in sorted(split.items())
        ]
    precisions = {precision(o.types) for o in ops}
    return InstructionMix(
        tensor_ops=ops,
        operand_precision=precisions.pop() if len(precisions) == 1 else None,
        global_loads=dict(sorted(loads.items())),
        global_stores=dict(sorted(stores.items())),
        cp_async=dict(sorted(copies.items())),
        **{k: counts[k] for k in ("tma_loads", "tma_stores", "local", "atomics", "one_thread_atomics")},
        shared_atomics=counts["shared_atomics"],
        **{k: counts[k] for k in ("float_conversions", "fp32_math", "fp64_math", "half_math", "special", "barriers")},
        mbarrier_waits=counts["mbarrier_waits"],
    )
