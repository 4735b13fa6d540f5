"""The special-function pipe (XU: MUFU's exp2, log2, reciprocal, square root, sine, cosine) where it is the busiest
unit measured: the source lines inside loops whose instructions go to it, and the pipe's own gain model. Event mode
reads the pipe from PM sampling (``xu_pct``), annotation and ncu modes from ncu's pipe utilisation. Pure.

Gain model: a pipe that sets the time is busy ``xu_pct`` of it, and its time scales with its work. The work of the
lines named is weighed in MUFU instructions, an IEEE fp32 division (PTX ``div.rn.f32``: MUFU.RCP and FCHK in SASS, a
call into a subroutine executed per call) at ``ieee_division_xu`` of them (2.0 measured on the H100,
conf/devices.json: the fdiv pair). The cheaper forms leave none of a hoistable special function per trip (computed
once before the loop, factored out of a sum) and one MUFU per division whose divisor changes every trip (the
approximate division, Triton's ``/``, or a reciprocal multiplied in): the time saved is the kernel's time x the
removable share of the pipe's work, capped by the stage's distance to its roof.
"""

from __future__ import annotations

from kbench.analysis import opcodes as oc
from kbench.analysis.catalogue.evidence import GAIN, Evidence, Opportunity, finding
from kbench.analysis.catalogue.issue import roof_fractions
from kbench.analysis.catalogue.lines import XU_BUSY_PCT, executing
from kbench.analysis.lines import Line

DIVISION = ("div.rn.f32", "div.full.f32", "div.approx.f32")  # PTX float divisions (one MUFU.RCP each)
IEEE = ("div.rn.f32", "FCHK")  # an IEEE fp32 division, in PTX and in SASS (the check beside its MUFU.RCP)
MOST_LINES = 2
# the routes measured on the H100 (tests/data/validation/fdiv, event mode, SM 1980 MHz, two rounds each, 2026-11-27)
DIVISION_ROUTES = (
    "measured on an H100 (tests/data/validation/fdiv: a division per term of a 128-term loop): tl.math.div_rn "
    "1200.6 us, x / y (div.full.f32) 766.9 us (-36%), x * rsqrt(d * d) (one MUFU.RSQ) 548.9 us (-54%)"
)


def _xu(x: Line) -> float:
    """The line's special-function instructions (one MUFU per PTX special function or float division)."""
    return sum(n for op, n in x.opcodes.items() if oc.pipe(op) == oc.XU)


def _ieee(x: Line) -> float:
    """The IEEE fp32 divisions the line executes (its div.rn.f32, or the FCHKs of their SASS)."""
    return max(x.opcodes.get("div.rn.f32", 0.0), x.opcodes.get("FCHK", 0.0))


def _work(x: Line, ratio: float) -> tuple[float, float]:
    """The line's XU work in MUFU instructions (an IEEE division at ``ratio`` of one), and what of it the cheaper
    forms remove: every MUFU of a hoistable special function, all but one MUFU of each division."""
    ieee = _ieee(x)
    work = _xu(x) + ieee * (ratio - 1.0)
    return work, work - ieee


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
    """The lines whose instructions go to the XU pipe, most first (static: inside loops only), and the share of the
    pipe's work the cheaper forms remove from them (of all the pipe's work where executed counts were measured; of
    the named lines' where static: the loops' trips outweigh what runs once); 1 where no line is known."""
    model = executing(e.lines)
    if model is None:
        return [], 1.0
    ratio = e.ieee_division_xu or 1.0
    lines = [x for x in model.lines if x.line > 0 and _xu(x) > 0 and (x.looped > 0 or not model.static)]
    lines.sort(key=_xu, reverse=True)
    named = lines[:MOST_LINES]
    total = sum(_work(x, ratio)[0] for x in (named if model.static else model.lines))
    return named, (sum(_work(x, ratio)[1] for x in named) / total if total else 1.0)


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
    division = any(op in DIVISION or op in IEEE for x in lines for op in x.opcodes)  # PTX, or SASS's FCHK
    what = f": its instructions at {'; '.join(_words(x) for x in lines)}" if lines else ""
    tl = "gl" if e.gluon else "tl"
    hoist = (
        f"take the special functions out of {e.name}'s loop: compute what does not change per trip once before it "
        f"(a reciprocal 1 / d hoisted, then multiply), factor them out of a sum (exp(x - c) = exp(x) exp(-c)), use "
        f"{tl}.math.exp2 with log2(e) folded into a constant instead of exp"
    )
    change = hoist
    if division:  # the divisor changes every trip: the division itself is the lever
        change = (
            "where IEEE rounding is not needed, an approximate division instead of the IEEE one (Triton's x / y on "
            f"floats is div.full.f32: one MUFU.RCP and a multiply, not {tl}.math.div_rn's IEEE subroutine with its "
            f"check), or a reciprocal multiplied in; {DIVISION_ROUTES}; and {hoist[0].lower()}{hoist[1:]}"
        )
    o = finding(
        e,
        f"Special-function pipe (XU) at {xu:.0f}% of its peak in {e.where}, the busiest unit{what}"
        + (" (static)" if lines and static else ""),
        e.kernel_us * share,
        (f"{e.name}.xu_pipe_pct", f"{xu:.1f}%"),
        change,
        whole_stage=True,
        at=lines[0] if lines else None,
    )
    saved = "kernel_us * xu_removable_share"
    inputs = e.gain_inputs(kernel_us=e.kernel_us, xu_removable_share=share)
    return o.model_copy(update={"formula": GAIN.format(saved=saved), "inputs": inputs})
