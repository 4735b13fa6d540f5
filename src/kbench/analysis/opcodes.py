"""What an instruction is: a SASS or PTX opcode's name as the per-line model keeps it, and the pipe (or unit) that
executes it. Pure.

The pipes follow ncu's names where one exists (sm__inst_executed_pipe_*: fma, alu, xu, fp64, lsu, tensor); the
others say what the instructions are (conversion, barrier, branch, other). On Hopper the conversions I2F/F2I/F2F run
on the special-function unit's side of the SM; they are named apart because their remedy differs (keep one type).
"""

from __future__ import annotations

import re

XU, CONVERSION, ALU, FMA, FP64, LSU, TENSOR, BARRIER, BRANCH, UNIFORM, OTHER = (
    "xu", "conversion", "alu", "fma", "fp64", "lsu", "tensor", "barrier", "branch", "uniform", "other",
)  # fmt: skip
PIPE_WORDS = {
    XU: "special-function unit (XU)", CONVERSION: "conversion", ALU: "integer ALU", FMA: "FP32 FMA",
    FP64: "FP64", LSU: "load/store", TENSOR: "tensor cores", BARRIER: "barrier", BRANCH: "branch",
    UNIFORM: "uniform datapath", OTHER: "other",
}  # fmt: skip

_SASS_PIPES: dict[str, str] = {
    "MUFU": XU,
    **dict.fromkeys(("I2F", "F2I", "F2F", "I2I", "F2FP", "I2FP", "F2IP"), CONVERSION),
    **dict.fromkeys(
        (
            "IMAD",
            "IADD3",
            "IADD",
            "IMUL",
            "LOP3",
            "LOP",
            "SHF",
            "SHL",
            "SHR",
            "LEA",
            "ISETP",
            "IABS",
            "IMNMX",
            "VIADD",
            "VIMNMX",
            "VIADDMNMX",
            "SEL",
            "PRMT",
            "POPC",
            "FLO",
            "BREV",
            "BMSK",
            "SGXT",
            "PLOP3",
            "ICMP",
        ),
        ALU,
    ),
    **dict.fromkeys(
        (
            "FFMA",
            "FADD",
            "FMUL",
            "FMNMX",
            "FSEL",
            "FSETP",
            "FSET",
            "FCHK",
            "FSWZADD",
            "HFMA2",
            "HADD2",
            "HMUL2",
            "HMNMX2",
            "HSETP2",
            "FFMA2",
            "FADD2",
            "FMUL2",
        ),
        FMA,
    ),
    **dict.fromkeys(("DFMA", "DADD", "DMUL", "DSETP", "DMNMX"), FP64),
    **dict.fromkeys(
        (
            "LDG",
            "STG",
            "LDS",
            "STS",
            "LDSM",
            "STSM",
            "LD",
            "ST",
            "LDL",
            "STL",
            "ATOM",
            "ATOMG",
            "ATOMS",
            "RED",
            "REDG",
            "REDUX",
            "LDGSTS",
            "LDGDEPBAR",
            "UTMALDG",
            "UTMASTG",
            "UTMAPF",
            "UBLKCP",
            "SHFL",
            "MATCH",
            "CCTL",
        ),
        LSU,
    ),
    **dict.fromkeys(("HMMA", "IMMA", "DMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA", "WARPGROUP"), TENSOR),
    **dict.fromkeys(("BAR", "SYNCS", "WARPSYNC", "MEMBAR", "DEPBAR", "ARRIVES", "ERRBAR", "FENCE"), BARRIER),
    **dict.fromkeys(("BRA", "BRX", "EXIT", "BSSY", "BSYNC", "CALL", "RET", "JMP", "JMX", "BPT", "YIELD"), BRANCH),
}
# SASS opcodes whose first modifier says what they do (MUFU.EX2, IMAD.HI, ATOM.ADD): the model keeps it
_KEEP_MODIFIER = {"MUFU", "IMAD", "BAR", "ATOM", "ATOMG", "RED", "REDG", "SYNCS"}  # SYNCS.PHASECHK: mbarrier wait
_PREDICATE = re.compile(r"^\s*@!?U?P\w+\s+")

# arithmetic whose type the model keeps (add.f32 runs on the FMA pipe, add.s32 on the integer ALU)
_PTX_TYPED = {"fma", "add", "mul", "sub", "mad", "min", "max", "abs", "neg", "div", "rem", "setp", "selp"}
_PTX_XU = {"ex2", "lg2", "rcp", "rsqrt", "sqrt", "sin", "cos", "tanh"}
_PTX_ALU = {
    "mad", "mul", "add", "sub", "shl", "shr", "and", "or", "xor", "not", "setp", "selp", "min", "max", "abs", "neg",
    "div", "rem", "mul24", "mad24", "popc", "clz", "bfe", "bfi", "prmt", "lop3", "shf",
}  # fmt: skip


def sass_opcode(instruction: str) -> str:
    """``@!P0 MUFU.EX2 R3, R2`` -> ``MUFU.EX2``; ``LDG.E.128 R4, [R2]`` -> ``LDG``."""
    head = _PREDICATE.sub("", instruction).split(" ", 1)[0].strip().rstrip(";")
    parts = head.split(".")
    op = ".".join(parts[:2]) if parts[0] in _KEEP_MODIFIER and len(parts) > 1 else parts[0]
    # what reaches a report is an opcode's name, never other text a capture or a file beside it holds
    return op if _OPCODE.fullmatch(op) else "?"


_OPCODE = re.compile(r"[A-Z][A-Z0-9_]{0,23}(?:\.[A-Z0-9_]{1,16})?")


_TYPES = re.compile(r"^(?:[subf]\d+|bf16|f16x2|bf16x2|tf32|e4m3|e5m2|pred|b\d+)$")


def ptx_opcode(name: str) -> str:
    """A PTX instruction's name as the model keeps it: its operation and the qualifiers that say what it does
    (``ld.global.v4.b32`` -> ``ld.global``, ``ex2.approx.f32`` -> ``ex2``, ``div.s32`` -> ``div.s32``,
    ``cvt.rn.f32.s32`` -> ``cvt.f32.s32``)."""
    parts = name.split(".")
    head = parts[0]
    types = [p for p in parts[1:] if _TYPES.match(p)]
    if head in ("ld", "st", "atom", "red", "cp") and len(parts) > 1:
        return f"{head}.{parts[1]}"
    if head == "cvt":
        return ".".join(["cvt", *types[-2:]])
    if head == "div" and types and types[-1].startswith("f") and len(parts) > 2:
        return f"div.{parts[1]}.{types[-1]}"  # div.rn.f32 (IEEE: a subroutine) and div.full.f32 (one reciprocal) differ
    if head in _PTX_TYPED and types:
        return f"{head}.{types[-1]}"
    return head


def pipe(opcode: str) -> str:
    """The pipe (or unit) a SASS or PTX opcode runs on (PIPE_WORDS)."""
    base = opcode.split(".")[0]
    if base.isupper() or base[:1].isupper():
        if base.startswith("U") and base not in _SASS_PIPES and base[1:] in _SASS_PIPES:
            return UNIFORM  # uniform-datapath copies of integer ops (UIADD3, ULOP3): one per warp, not per thread
        return _SASS_PIPES.get(base, OTHER)
    return _ptx_pipe(opcode)


def _ptx_pipe(opcode: str) -> str:
    head, _, kind = opcode.partition(".")
    floats = [t for t in kind.split(".") if t.startswith(("f", "bf", "e4", "e5", "tf"))]
    if head in _PTX_XU:
        return XU
    if head == "div" and kind.endswith("f32"):
        return XU  # a float division is a reciprocal on the special-function unit and FMAs around it
    if head == "cvt":
        return CONVERSION if floats else ALU
    if head in ("ld", "st", "atom", "red", "cp", "shfl", "ldmatrix", "stmatrix"):
        return LSU
    if head in ("mma", "wgmma"):
        return TENSOR
    if head in ("bar", "barrier", "fence", "membar", "mbarrier"):
        return BARRIER
    if head in ("bra", "ret", "exit", "call"):
        return BRANCH
    if head in _PTX_TYPED and floats:
        return FP64 if kind.endswith("f64") else FMA
    return ALU if head in _PTX_ALU else OTHER


def is_division(opcodes: dict[str, float]) -> bool:
    """Integer division or modulo by a value known only at run time: PTX's div/rem on integers, or the sequence
    ptxas expands it to in SASS (a reciprocal estimate I2F.RP + MUFU.RCP, then IMAD.HI corrections)."""
    ptx = any(o.split(".")[0] in ("div", "rem") and not o.endswith(("f32", "f64")) for o in opcodes)
    return ptx or ("MUFU.RCP" in opcodes and any(o.startswith("I2F") for o in opcodes) and "IMAD.HI" in opcodes)
