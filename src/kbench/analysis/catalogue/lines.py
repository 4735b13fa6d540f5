"""Advice from attribution: the source line(s) that carry an aggregate (a stall reason, a busy pipe), what the
instructions on them are, and the cheaper way to get the same result; and the hottest line as an item of its own
where the named items leave most of the distance to the roof unexplained. Pure.

Gain model of the hottest-line item: the time the line holds, its share of the kernel's warp-state samples (PC
samples fall on warps in proportion to the time they spend there) times the kernel's time, capped by what the
named items leave of the stage's distance to its practical roof. It is named only where the line holds at least
HOT_LINE_SHARE of the time, the named items explain less than half of the distance, the stage is at least
HEALTHY_GAP from its roof, and its opcodes name a cheaper way (never the loads and stores of a memory-bound stage).
A static model (event mode: no samples) weighs the line by its share of the instructions inside loops as written,
and names an item only where those are of a costly kind (special functions, conversions, division sequences,
atomics) holding STATIC_COSTLY_SHARE of them, said "static".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kbench.analysis import opcodes as oc
from kbench.analysis.catalogue.barriers import awaited
from kbench.analysis.catalogue.evidence import GAIN, Evidence, Opportunity, entry, finding
from kbench.analysis.lines import Line, LineModel

HOT_LINE_SHARE = 0.5  # a line holding at least this share of the kernel's time is an item when the rest is unnamed
UNNAMED_SHARE = 0.5  # ... when the named items explain less than this share of the distance to the roof
STATIC_COSTLY_SHARE = 0.25  # static: the line's costly instructions, of the loops' instructions as written
ATOMICS = ("atom", "atomg", "red", "redg", "atoms")  # SASS and PTX, lower-cased
NOTABLE = 0.1  # an opcode class holding this share of a line's instructions names its cause
MBARRIER_WAIT = ("SYNCS.PHASECHK",)  # SASS of an mbarrier (try-)wait; its arrive and expect are SYNCS.ARRIVE
HEALTHY_GAP = 0.25  # a stage closer to its roof than this share of its time gets no line item
MBARRIER = "an mbarrier wait (SYNCS.PHASECHK in a retry loop)"  # what such a line is, as items name it


@dataclass(frozen=True)
class Cause:
    what: str  # what the instructions on the line are
    change: str  # the cheaper way to the same result, in a Triton kernel's terms
    costly: bool = False  # special functions, conversions, division, atomics: unusual in a hot loop
    memory: bool = False  # loads and stores: the work of a memory-bound stage
    gluon: str | None = None  # the same in a Gluon kernel's terms (None: the change says it in both)
    rounds: float | None = None  # the loads waited on: how many times each warp issued them (LineModel.rounds)

    def lever(self, gluon: bool) -> str:
        """The change in the kernel's own language's terms."""
        return self.gluon if gluon and self.gluon else self.change


def _share(x: Line, keep: tuple[str, ...]) -> float:
    n = sum(v for op, v in x.opcodes.items() if oc.pipe(op) in keep)
    return n / x.instructions if x.instructions else 0.0


def _named(x: Line, pipe: str) -> str:
    """The opcodes of one pipe on the line: ``MUFU.EX2, MUFU.RCP``."""
    return ", ".join(op for op in x.opcodes if oc.pipe(op) == pipe)


def cause(x: Line, shared_conflicts: float | None = None, model: LineModel | None = None) -> Cause | None:
    """What the instructions on line ``x`` are and the cheaper way, first the costly kinds a kernel can avoid; an
    mbarrier wait named by its barrier and what completes it where the kernel's lines (``model``) show it."""
    ops = x.opcodes
    if oc.is_division(ops):
        return Cause(
            "integer division or modulo by a value known only at run time (ptxas's reciprocal sequence: "
            f"{', '.join(o for o in ops if o.startswith(('I2F', 'MUFU.RCP', 'IMAD.HI', 'div', 'rem')))})",
            "make the divisor a tl.constexpr (the compiler then uses shifts and a multiply), or pass a precomputed "
            "reciprocal / magic number, and hoist the quotient out of the loop (advance it by adding)",
            costly=True,
            gluon="make the divisor a gl.constexpr (the compiler then uses shifts and a multiply), or pass a "
            "precomputed reciprocal / magic number, and hoist the quotient out of the loop (advance it by adding)",
        )
    if atomics := [o for o in ops if o.split(".")[0].lower() in ATOMICS]:
        return Cause(
            f"atomics ({', '.join(atomics)})",
            "reduce in registers first (tl.sum over the tile) and issue one atomic per program, or write partial "
            "results and reduce them in a second pass",
            costly=True,
            gluon="reduce in registers first (gl.sum over the tile) and issue one atomic per program "
            "(gl.atomic_add), or write partial results and reduce them in a second pass",
        )
    if _share(x, (oc.XU,)) >= NOTABLE:
        return _special(_named(x, oc.XU))
    if _share(x, (oc.CONVERSION,)) >= NOTABLE:
        return Cause(
            f"type conversions ({_named(x, oc.CONVERSION)})",
            "keep one type through the loop: load the operands in the type the arithmetic uses, accumulate in it, "
            "and convert once after the loop (index arithmetic in integers, not floats)",
            costly=True,
        )
    shared = [o for o in ops if o.split(".")[0].upper() in ("LDS", "STS", "LDSM", "STSM")]
    if shared and _share(x, (oc.LSU,)) >= NOTABLE and shared_conflicts:
        return Cause(
            f"shared-memory accesses ({', '.join(shared)}) with bank conflicts",
            "fewer, wider shared-memory accesses (16 bytes a thread) and no layout conversions through shared memory "
            "(tl.trans, reshapes), or a swizzled / padded layout so a warp's accesses hit distinct banks",
            gluon="fewer, wider shared-memory accesses (16 bytes a thread) and fewer gl.convert_layout calls that go "
            "through shared memory (registers' layouts chosen to match), or a swizzled NVMMASharedLayout / padded "
            "shared layout so a warp's accesses hit distinct banks",
        )
    if any(o.startswith(MBARRIER_WAIT) for o in ops):  # the retry loop's integer ops are not the cause
        return waited(x, model)
    busiest = max(x.pipes.items(), key=lambda kv: kv[1], default=None)
    return None if busiest is None else _BY_PIPE.get(busiest[0], lambda y: None)(x)


def waited(x: Line, model: LineModel | None) -> Cause:
    """An mbarrier wait: the barrier it waits on and what completes it (kbench.analysis.catalogue.barriers), and the
    change that fits: TMA copies issued earlier, other warps' arrive made earlier, or (not known) either."""
    spin = MBARRIER
    b = awaited(x, model) if model is not None else None
    if b is not None and b.by == "copy":
        return Cause(
            f"{spin} on {b.words()}",
            "issue the copy this wait is for earlier: the copy that fills the next stage a whole MMA ahead of its "
            "wait, or more, smaller stages",
            memory=True,
        )
    if b is not None and b.by == "arrive":
        return Cause(
            f"{spin} on {b.words()}",
            "the waiting warps idle until the arriving warps reach their arrive: arrive as soon as what the barrier "
            "guards is written, and give the waiting warps independent work before the wait (the next tile's loads or "
            "MMA) so the two sides overlap instead of taking turns, or let each side compute what it waits for",
        )
    on = f" on {b.words()}" if b is not None else ""
    return Cause(
        f"{spin}{on}: warps wait for asynchronous copies (TMA) or other warps' arrivals",
        "complete the barrier earlier: the copies it waits for issued a whole MMA ahead of the wait (or more, smaller "
        "stages), or the other warps' arrive made as soon as what it guards is written; and give the waiting warps "
        "independent work before the wait",
        memory=True,
    )


_BY_PIPE = {
    oc.ALU: lambda x: Cause(
        f"integer index arithmetic ({_named(x, oc.ALU)})",
        "less address arithmetic per element: tl.constexpr strides and shapes, pointers advanced by a constant each "
        "iteration instead of recomputed offsets, tl.multiple_of / tl.max_contiguous hints",
        gluon="less address arithmetic per element: gl.constexpr strides and shapes, pointers advanced by a constant "
        "each iteration instead of recomputed offsets, or TMA copies (tensor descriptors do the addressing)",
    ),
    oc.LSU: lambda x: Cause(
        f"memory instructions ({_named(x, oc.LSU)})",
        "fewer, wider accesses (16 contiguous bytes a thread) and no re-loads of what a program already holds",
        memory=True,
    ),
    oc.FMA: lambda x: Cause(
        f"FP32 arithmetic ({_named(x, oc.FMA)})",
        "dot-like work on the tensor cores (tl.dot), packed half-precision math, or fewer operations per element",
        gluon="dot-like work on the tensor cores (warpgroup_mma), packed half-precision math, or fewer operations "
        "per element",
    ),
    oc.FP64: lambda x: Cause(
        f"FP64 arithmetic ({_named(x, oc.FP64)})", "FP32 where the accuracy allows (no float64 inputs or constants)"
    ),
    oc.BARRIER: lambda x: Cause(
        f"barriers ({_named(x, oc.BARRIER)})", "more work between barriers: a larger tile per iteration"
    ),
}


def _special(ops: str) -> Cause:
    return Cause(
        f"special-function work ({ops}) on the special-function unit, a sixteenth of the FP32 rate",
        "fewer special functions per element: hoist them out of the loop or compute them once per row, use exp2 "
        "with log2(e) folded into a constant (tl.math.exp2(x * C)) instead of exp, and multiply by a reciprocal "
        "computed once instead of dividing",
        costly=True,
        gluon="fewer special functions per element: hoist them out of the loop or compute them once per row, use "
        "gl.exp2 with log2(e) folded into a constant (gl.exp2(x * C)) instead of gl.exp, and multiply by a "
        "reciprocal computed once instead of dividing",
    )


# the reasons a saturated special-function unit shows as (its queue is the MIO's; its results are short-scoreboard
# waits), and how busy its pipe must be to name it without per-line samples
XU_REASONS = ("mio_throttle", "short_scoreboard", "math_pipe_throttle")
XU_BUSY_PCT = 50.0


def carried(e: Evidence, reason: str) -> tuple[str, Cause | None, Line | None]:
    """The line(s) that carry stall ``reason`` (" carried by line L `code` (X% of its samples; opcodes ...)"), what
    the instructions of the first are, and that line; without per-line samples, the special-function unit where its
    pipe is the busiest and at least XU_BUSY_PCT busy on a reason it shows as; else ("", None, None)."""
    model = executing(e.lines)
    found = [] if model is None or model.static else model.carrying(reason)
    if not found:
        busiest = max(e.pipes.items(), key=lambda kv: kv[1], default=("", 0.0))
        xu = reason in XU_REASONS and busiest[0] == "xu" and busiest[1] >= XU_BUSY_PCT
        return "", _special(f"its pipe {busiest[1]:.0f}% busy, the busiest") if xu else None, None
    words = "; ".join(f"{x.quoted} ({100 * s:.0f}% of its samples; {x.opcode_words()})" for x, s in found)
    x = found[0][0]
    return f"; carried in {e.where} by {words}", waited_on(reason, x, cause(x, e.shared_conflicts, model), model), x


# the stall reason whose warps wait on the L1TEX path's results (global and local memory, textures), its instructions
L1TEX_WAITS = ("long_scoreboard",)
L1TEX_OPS = ("LDG", "LDL", "TEX", "TLD", "LD", "ld.global", "ld.local")  # the loads (a store returns nothing)
ONE_ROUND = 1e-6  # how far from exactly one a count of issues per warp may lie and still be "once"


def load_rounds(found: Cause | None, e: Evidence) -> float | None:
    """The rounds a wait's loads came in (``found``: ``waited_on``'s cause), where they say what a change could bring
    forward: in a kernel that is not warp-specialized (there a count per warp launched averages its partitions' loops
    with warps that never run them) whose CTAs were all resident at once (one wave or less, counted for the kernel
    its line model describes: a stage's launch facts may be another kernel's). None elsewhere."""
    if found is None or found.rounds is None or e.partition_warps:
        return None
    if e.lines is not None and e.kernel and e.lines.kernel != e.kernel:
        return None
    return found.rounds if e.waves is not None and e.waves <= 1.0 else None


def settled(found: Cause | None, e: Evidence) -> bool:
    """Whether the loads a line waits on leave nothing to bring forward: each warp issued them exactly once (no loop
    re-issued them) in one wave (``load_rounds``): no later round, no later warp. Their wait stays a step of the
    distance."""
    rounds = load_rounds(found, e)
    return rounds is not None and abs(rounds - 1.0) <= ONE_ROUND


def _l1tex_load(op: str) -> bool:
    return op.split(".")[0] in L1TEX_OPS or op in L1TEX_OPS


def _loads(y: Line) -> float:
    return sum(n for op, n in y.opcodes.items() if _l1tex_load(op))


def waited_on(reason: str, x: Line, found: Cause | None, model: LineModel | None = None) -> Cause | None:
    """What line ``x`` is, as far as stall ``reason`` waits on it: warps stalled on the long scoreboard wait on
    the L1TEX path (global or local memory), so where the line's instructions name another unit (a layout
    conversion's shared-memory round trip, a special function: the MIO's, which show as short-scoreboard waits),
    the wait is named instead: on the line's own loads, or, where it has none, the loads whose results it uses (a
    sample falls on the instruction that waits, the first use of a loaded register): the kernel's lines that load,
    most loads first. An mbarrier's try-wait, also a long-scoreboard wait, and a line of memory instructions stay
    what they are; a line the catalogue names nothing for keeps the stall's own words."""
    if reason not in L1TEX_WAITS or found is None or found.what.startswith((MBARRIER, "atomics")) or found.memory:
        return found  # an atomic with a result is itself an L1TEX operation waited on
    if ops := [op for op, n in x.opcodes.items() if _l1tex_load(op) and n > 0]:
        what = f"global or local memory instructions ({', '.join(ops)}), which the stalled warps wait on"
        waited = [x]
    else:
        loading = [] if model is None else sorted((y for y in model.lines if _loads(y)), key=_loads, reverse=True)
        if not loading:
            return found
        waited = loading[:2]
        issued = "; ".join(
            f"{y.quoted} ({', '.join(f'{op} x{n:.0f}' for op, n in y.opcodes.items() if _l1tex_load(op))})"
            for y in waited
        )
        what = f"a use of global or local loads' results, which the stalled warps wait on (the loads: {issued})"
    counted = [] if model is None else [r for y in waited if (r := model.rounds(y, _l1tex_load)) is not None]
    rounds = max(counted) if counted else None
    if rounds is not None:
        what += (
            "; each warp issued them once (no loop re-issued them)"
            if abs(rounds - 1.0) <= ONE_ROUND
            else f"; each warp issued them {rounds:.2f} times over, on average over the warps launched"
        )
    return Cause(
        what,
        "more independent loads in flight before their first use (a larger BLOCK per thread, loads of later "
        "iterations issued before the arithmetic on earlier ones, more CTAs per SM through fewer registers or a grid "
        "of several waves), or fewer loads (reuse tiles kept in shared memory)",
        memory=True,
        gluon="more independent loads in flight before their first use (more elements per thread in the loads' "
        "layouts, loads of later iterations issued before the arithmetic on earlier ones, or TMA copies into a "
        "ring of shared-memory stages), more CTAs per SM (fewer registers, a grid of several waves), or fewer loads",
        rounds=rounds,
    )


def executing(model: LineModel | None) -> LineModel | None:
    """The line model without the kernel's entry lines (``def``: its prologue's samples, or a warp-specialized
    kernel's idle warps'): an item's place is a line that executes a statement."""
    if model is None or not any(entry(x.code) for x in model.lines):
        return model
    return replace(model, lines=tuple(x for x in model.lines if not entry(x.code)))


def hottest(e: Evidence, left_pct: float, explained_pct: float) -> Opportunity | None:
    """The hottest line as an item of its own when the named items explain less than half of the distance to the
    roof (``explained_pct`` of the plan, ``left_pct`` left of it)."""
    model, lines = e.lines, executing(e.lines)  # shares of the whole kernel; the place a line that executes
    gap = e.gain(e.gap_us)
    if model is None or lines is None or lines.hottest is None or left_pct <= 0 or explained_pct >= UNNAMED_SHARE * gap:
        return None
    if e.kernels is not None and len(e.kernels.kernels) > 1 and e.kernel and e.kernel != model.kernel:
        return None  # the lines of another kernel than the one the stage's facts describe
    if e.gap_us < HEALTHY_GAP * e.us:
        return None  # within reach of its roof: its hottest line is the stage's work, not a defect
    x = lines.hottest
    if model.static:  # the line inside loops whose costly instructions weigh most
        x = max(lines.lines, key=lambda y: y.looped if (c := cause(y)) is not None and c.costly else -1.0)
    share = model.time_share(x)
    found = cause(x, e.shared_conflicts, model)
    if x.top_stall is not None:  # a line whose warps wait on loads is their use, whatever else it computes
        found = waited_on(x.top_stall, x, found, model)
    if settled(found, e):
        return None  # its loads issued once, together, in one wave: the stall items name nothing there either
    if found is None or (found.memory and e.memory_limited):
        return None  # no cheaper way to name, or the loads and stores a memory-bound stage exists to make
    if model.static:
        if not found.costly or not x.looped or share < STATIC_COSTLY_SHARE:
            return None  # a static mix explains nothing unless a loop is dominated by costly instructions
        holds = f"{100 * share:.0f}% of the instructions inside {model.kernel}'s loops as written (static)"
    elif share < HOT_LINE_SHARE:
        return None
    else:
        holds = (
            f"{100 * share:.0f}% of {model.kernel}'s stall samples and {100 * model.instruction_share(x):.0f}% of its "
            "instructions executed"
        )
    listed = f"lines/{e.name}.md" if model.static else f"source/{e.name}.md"
    o = finding(
        e,
        f"Line {x.where} holds {holds} in {e.where}{f': `{x.code}`' if x.code else ''}; its opcodes "
        f"{x.opcode_words()} ({found.what})" + (f", most stalled on {x.top_stall}" if x.top_stall else ""),
        e.us * share,
        (f"{e.name}.line_{x.line}_share", f"{100 * share:.1f}%"),
        f"{found.lever(e.gluon)} ({listed} lists every line)",
        at=x,
    )
    return o.capped(left_pct, "left_pct", left_pct=left_pct)


# warp-stall reasons of warps waiting on global (or local) memory and its queue: the time a memory item can save
MEMORY_WAITS = ("long_scoreboard", "lg_throttle", "drain")
# the items built on a global-memory aggregate (bytes per sector, bytes in flight, bytes over the model), by metric
MEMORY_ITEMS = ("bytes_per_sector", "bytes_in_flight", "bytes_over_model")
GLOBAL_OPS = ("LDG", "STG", "LDGSTS", "UTMALDG", "UTMASTG", "UBLKCP", "ATOM", "ATOMG", "RED", "REDG", "ld.global",
              "st.global", "cp.async", "atom.global", "red.global")  # fmt: skip


def _global_op(op: str) -> bool:
    return op.split(".")[0] in GLOBAL_OPS or op in GLOBAL_OPS


# every other item built on an aggregate, by a fragment of its metric: the opcodes that carry it
CARRIERS: tuple[tuple[tuple[str, ...], Callable[[str], bool]], ...] = (
    (MEMORY_ITEMS, _global_op),
    (("tensor_feed_cap",), lambda op: oc.pipe(op) == oc.TENSOR),  # narrow tiles: the MMAs themselves
    (("flops_over_model", "tensor_", "repeated_tensor_work"), lambda op: oc.pipe(op) in (oc.TENSOR, oc.FMA)),
    (("fp64_instructions",), lambda op: oc.pipe(op) == oc.FP64),
    (("local_memory_bytes", "spilled_registers"), lambda op: op.split(".")[0] in ("LDL", "STL", "ld", "st")
     and (op.startswith(("LDL", "STL")) or op.endswith("local"))),
    (("global_atomics",), lambda op: op.split(".")[0].lower() in ATOMICS),
)  # fmt: skip


def attributed(e: Evidence, o: Opportunity) -> Opportunity:
    """An item built on an aggregate with the lines whose instructions carry it; a global-memory item's gain, where
    warp-state samples were taken, capped by the time warps waited on memory (its mechanism cannot save more)."""
    model = executing(e.lines)
    kind = next((pick for frags, pick in CARRIERS if any(f in o.metric for f in frags)), None)
    if model is None or kind is None:
        return o

    def count(x: Line) -> float:
        return sum(n for op, n in x.opcodes.items() if kind(op))

    carrying = sorted((x for x in model.lines if count(x)), key=count, reverse=True)[:2]
    if not carrying:
        return o
    words = "; ".join(
        f"{x.quoted} ({', '.join(f'{op} x{n:.0f}' for op, n in x.opcodes.items() if kind(op))})" for x in carrying
    )
    change = f"{o.change}; its instructions in {e.where}: {words}{' (static)' if model.static else ''}"
    placed = o if o.line is not None else o.at(carrying[0])
    if kind is not _global_op or model.static or not model.samples:
        return placed.model_copy(update={"change": change})
    waiting = sum(x.stalls.get(r, 0.0) for x in model.lines for r in MEMORY_WAITS) / model.samples
    cap = e.gain(e.kernel_us * waiting)
    if cap < o.gain_pct:
        change += f"; warps waited on memory in {100 * waiting:.0f}% of the stall samples: the gain is capped there"
    inputs = e.gain_inputs(kernel_us=e.kernel_us, memory_wait_share=waiting)
    return placed.capped(cap, GAIN.format(saved="kernel_us * memory_wait_share"), **inputs).model_copy(
        update={"change": change}
    )
