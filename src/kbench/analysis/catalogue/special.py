"""The special-function pipe (XU: MUFU's exp2, log2, reciprocal, square root, sine, cosine) where it is the busiest
unit measured: the source lines inside loops whose instructions go to it, and the pipe's own gain model. Event mode
reads the pipe from PM sampling (``xu_pct``), annotation and ncu modes from ncu's pipe utilisation. Pure.

Gain model: a pipe that sets the time is busy ``xu_pct`` of it; the lines named hold ``share`` of its instructions
(executed, where measured; statically, every special function inside a loop runs on each trip and those outside it
once, so the loops' lines hold it all). The cheaper forms (the special function hoisted out of the loop or factored
out of the sum, a reciprocal computed once and multiplied by) leave none of them per trip, so the time saved is the
pipe's busy time on those lines: time x xu_pct x share, capped by the stage's distance to its roof. A PTX ``div.rn.f32``
(IEEE division, Triton's ``/`` on floats) is a call into a subroutine of FMAs around one MUFU.RCP, executed per call:
the fast form (``div.full.f32``) keeps that reciprocal, so it saves the subroutine's FMAs, not the pipe's time.
"""

from __future__ import annotations

from kbench.analysis import opcodes as oc
from kbench.analysis.catalogue.evidence import GAIN, Evidence, Opportunity, finding
from kbench.analysis.catalogue.issue import roof_fractions
from kbench.analysis.catalogue.lines import XU_BUSY_PCT, executing
from kbench.analysis.lines import Line

DIVISION = ("div.rn.f32", "div.full.f32", "div.approx.f32")  # PTX float divisions (one MUFU.RCP each)
MOST_LINES = 2


def _xu(x: Line) -> float:
    """The line's special-function instructions (one MUFU per PTX special function or float division)."""
    return sum(n for op, n in x.opcodes.items() if oc.pipe(op) == oc.XU)


def _words(x: Line) -> str:
    ops = []
    for op, n in x.opcodes.items():
        if oc.pipe(op) != oc.XU:
            continue
        said = f"{op} x{n:.0f}"
        if op == "div.rn.f32":
            said += " (IEEE division: a call into a subroutine of FMAs around one MUFU.RCP, executed per call)"
        ops.append(said)
    return f"{x.quoted} ({', '.join(ops)})"


def xu_lines(e: Evidence) -> tuple[list[Line], float]:
    """The lines whose instructions go to the XU pipe, most first (static: inside loops only), and their share of the
    pipe's instructions (static: 1, the loops' trips outweigh what runs once)."""
    model = executing(e.lines)
    if model is None:
        return [], 1.0
    lines = [x for x in model.lines if x.line > 0 and _xu(x) > 0 and (x.looped > 0 or not model.static)]
    lines.sort(key=_xu, reverse=True)
    named = lines[:MOST_LINES]
    if model.static:
        return named, 1.0
    total = sum(_xu(x) for x in model.lines)
    return named, (sum(_xu(x) for x in named) / total if total else 1.0)


def xu_bound(e: Evidence) -> Opportunity | None:
    """The XU pipe at XU_BUSY_PCT of its peak or more and busier than every other unit measured (the other pipes, the
    tensor pipe, DRAM, the modelled work on the practical roofs): its lines and the time its work there takes."""
    xu = e.pipes.get("xu")
    if xu is None or xu < XU_BUSY_PCT:
        return None
    compute, memory = roof_fractions(e)
    if xu < max(compute, memory, *(v for p, v in e.pipes.items() if p != "xu")):
        return None  # another unit is nearer its ceiling: the special functions do not set the time
    lines, share = xu_lines(e)
    static = e.lines is not None and e.lines.static
    division = any(op in DIVISION for x in lines for op in x.opcodes)
    what = f": its instructions at {'; '.join(_words(x) for x in lines)}" if lines else ""
    tl = "gl" if e.gluon else "tl"
    change = (
        f"take the special functions out of {e.name}'s loop: compute what does not change per trip once before it "
        f"(a reciprocal 1 / d hoisted, then multiply), factor them out of a sum (exp(x - c) = exp(x) exp(-c)), use "
        f"{tl}.math.exp2 with log2(e) folded into a constant instead of exp"
    )
    if division:
        change += (
            f"; where the divisor changes every trip and IEEE rounding is not needed, {tl}.math.fdiv(x, y) (div.full: "
            "one MUFU.RCP and a multiply, without the IEEE subroutine's FMAs and its check) instead of x / y"
        )
    o = finding(
        e,
        f"Special-function pipe (XU) at {xu:.0f}% of its peak in {e.where}, the busiest unit{what}"
        + (" (static)" if lines and static else ""),
        e.kernel_us * xu / 100.0 * share,
        (f"{e.name}.xu_pipe_pct", f"{xu:.1f}%"),
        change,
        whole_stage=True,
        at=lines[0] if lines else None,
    )
    saved = "kernel_us * xu_pipe_pct / 100 * xu_line_share"
    inputs = e.gain_inputs(kernel_us=e.kernel_us, xu_pipe_pct=xu, xu_line_share=share)
    return o.model_copy(update={"formula": GAIN.format(saved=saved), "inputs": inputs})
