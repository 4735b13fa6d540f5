"""The warp-state family: why a stage's warps did not issue, from ncu's per-reason stall counters (annotation and ncu
modes; every reason of the Nsight Compute profiling guide's "Warp Stall Reasons" but "selected", the warp that did
issue) or Proton's PC samples. Each reason maps to a mechanism: what the warps wait on, and what in a Triton
kernel removes that wait. Pure.

Gain model: what the named mechanisms leave of the stage's distance to its practical roof, times the reason's share
of all its stalled warps (stall cycles attributed to their reasons in proportion). A reason is named when it holds
at least DOMINANT_SHARE of them, at most two reasons a stage.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from kbench.analysis.catalogue import pipeline
from kbench.analysis.catalogue.evidence import Evidence, Opportunity, entry
from kbench.analysis.catalogue.lines import MBARRIER, ONE_ROUND, carried, load_rounds, settled
from kbench.analysis.lines import FLAG, Line, holds

DOMINANT_SHARE = 0.25  # a stall reason holding at least this share of a stage's stalled warps is named
MOST = 2  # reasons named per stage
# reasons whose cause is an instruction pipe: their item names the busiest pipes (ncu's sm__inst_executed_pipe_*)
PIPE_BOUND = ("math_pipe_throttle", "dispatch_stall", "not_selected", "wait", "mio_throttle", "lg_throttle")
# reasons that wait on shared memory: their item says how many shared-memory wavefronts bank conflicts added
SHARED_BOUND = ("mio_throttle", "short_scoreboard")
# what each pipe executes, in a Triton kernel's terms
PIPE_WORDS = {
    "fma": "FP32 multiply-add", "alu": "integer and logic", "xu": "special functions (exp, log, sqrt, division)",
    "fp64": "FP64", "lsu": "loads and stores", "adu": "address divergence and branches", "uniform": "uniform (scalar)",
    "tensor_op_gmma": "warpgroup MMA", "tensor_op_hmma": "warp MMA",
}  # fmt: skip


@dataclass(frozen=True)
class Stall:
    mechanism: str  # what the warps wait on
    change: str  # what removes the wait, in a Triton kernel's terms
    gluon: str | None = None  # the same in a Gluon kernel's terms (None: the change says it in both)


STALLS: dict[str, Stall] = {
    "long_scoreboard": Stall(
        "warps wait on global or local memory loads",
        "more independent loads in flight before their first use (num_stages for tl.dot loops, a larger BLOCK per "
        "thread, more CTAs per SM through fewer registers), or fewer loads (reuse tiles kept in shared memory)",
        gluon="more loads in flight before their first use: tiles copied by TMA into a ring of shared-memory stages "
        "(an mbarrier each) a stage or more ahead of their use, more elements per thread in the loads' layouts "
        "(size_per_thread), or fewer loads (tiles kept in shared memory)",
    ),
    "barrier": Stall(
        "warps wait at CTA barriers for the other warps",
        "even out the warps' work inside a CTA and do more work between barriers (a larger BLOCK_K per iteration, "
        "fewer tl.debug_barrier / reductions across warps), or fewer warps per CTA",
        gluon="fewer CTA-wide barriers in the loop (gl.thread_barrier, gl.convert_layout through shared memory) and "
        "more work between them: {blocks}; or warp-specialized partitions that hand data over through mbarriers "
        "instead of CTA barriers",
    ),
    "short_scoreboard": Stall(
        "warps wait on shared-memory or special-function results",
        "fewer shared-memory round trips and special functions in the dependent chain (exp2 on pre-scaled inputs "
        "instead of exp, no layout conversions between ops), no bank conflicts",
        gluon="fewer shared-memory round trips and special functions in the dependent chain (gl.exp2 on pre-scaled "
        "inputs, registers' layouts chosen so no gl.convert_layout sits between ops), no bank conflicts",
    ),
    "mio_throttle": Stall(
        "the memory-input/output queue (shared memory, special functions) is full",
        "fewer, wider shared-memory instructions (16-byte vectors), no bank conflicts, fewer layout conversions "
        "(tl.trans / reshapes that go through shared memory)",
        gluon="fewer, wider shared-memory instructions (layouts that give each thread 16-byte vectors), no bank "
        "conflicts (swizzled NVMMASharedLayout), fewer gl.convert_layout calls that go through shared memory",
    ),
    "lg_throttle": Stall(
        "the local/global memory instruction queue is full",
        "fewer, wider global accesses (16 bytes per thread: aligned, contiguous pointers), and no local memory "
        "(register spills)",
        gluon="fewer, wider global accesses (16 bytes per thread: a layout whose fastest dimension is the contiguous "
        "one, or TMA copies), and no local memory (register spills)",
    ),
    "math_pipe_throttle": Stall(
        "an arithmetic pipe is saturated",
        "move the arithmetic to the tensor cores (tl.dot) or to cheaper instructions (packed fp16x2/bf16x2 math, "
        "exp2, fewer float conversions)",
        gluon="move the arithmetic to the tensor cores (warpgroup_mma) or to cheaper instructions (packed "
        "fp16x2/bf16x2 math, gl.exp2, fewer float conversions)",
    ),
    "wait": Stall(
        "each instruction waits a fixed latency on the one before (a dependent chain)",
        "more independent work per thread (more elements per thread, unrolled independent accumulators) or more "
        "warps per SM to interleave",
        gluon="more independent work per thread (more elements per thread in its layouts, independent "
        "accumulators) or more warps to interleave",
    ),
    "not_selected": Stall(
        "warps are ready but the issue slots are taken: the stage is issue-bound",
        "fewer instructions per byte or FLOP: wider loads and stores, packed math, work moved to the tensor cores, "
        "less index arithmetic in the loop (constexpr strides, tl.multiple_of hints)",
        gluon="fewer instructions per byte or FLOP: wider loads and stores (16-byte vectors from the layouts, or TMA "
        "copies), work moved to the tensor cores (warpgroup_mma), less index arithmetic in the loop (gl.constexpr "
        "strides)",
    ),
    "dispatch_stall": Stall(
        "the dispatcher could not issue the selected instruction (pipe contention)",
        "fewer instructions competing for one pipe in the hot loop (ncu mode's report-verbose.md shows the pipes)",
    ),
    "gmma": Stall(
        "warps wait on warpgroup MMA (wgmma) operands or results",
        "keep the tensor cores fed: more num_stages so the next tile is in shared memory before the MMA needs it, "
        "two consumer warpgroups (num_warps=8), larger tiles per MMA",
        gluon="keep the tensor cores fed: the next tile in shared memory before its warpgroup_mma (a deeper ring of "
        "mbarrier/TMA stages), asynchronous MMAs (is_async=True, warpgroup_mma_wait leaving the last ones "
        "outstanding) so the warps go on issuing, {blocks} for larger tiles per MMA",
    ),
    "no_instruction": Stall(
        "warps wait for instructions (instruction-cache misses)",
        "a smaller hot loop: fewer statically unrolled steps (tl.static_range) and fewer specialised branches",
        gluon="a smaller hot loop: fewer statically unrolled steps (gl.static_range) and fewer specialised branches",
    ),
    "branch_resolving": Stall(
        "warps wait for branch targets to resolve (divergent control flow)",
        "masks (tl.where) instead of data-dependent branches inside the loop",
        gluon="masks (gl.where) instead of data-dependent branches inside the loop",
    ),
    "drain": Stall(
        "warps wait at exit for their stores to drain",
        "more work per CTA (fewer, longer CTAs: a persistent grid) so the exit drain is a smaller share",
    ),
    "membar": Stall(
        "warps wait on memory fences",
        "fewer fences: atomics with relaxed semantics (sem='relaxed') where ordering is not needed",
        gluon="fewer fences (fence_async_shared only where a shared-memory write feeds an asynchronous read) and "
        "atomics with relaxed semantics where ordering is not needed",
    ),
    "imc_miss": Stall(
        "warps wait on the immediate-constant cache",
        "fewer distinct kernel arguments and constants read in the loop",
    ),
    "tex_throttle": Stall(
        "the texture/TMA unit's queue is full",
        "fewer texture or bulk-copy requests: larger TMA boxes",
        gluon="fewer bulk-copy requests: larger TMA boxes (the tensor descriptors' block shapes)",
    ),
    "sleeping": Stall("warps sleep (nanosleep, yield)", "no spin-waits between CTAs"),
    "misc": Stall("miscellaneous hardware stalls", "see ncu mode's report-verbose.md"),
}


def _lever(s: Stall, e: Evidence) -> str:
    """What removes the stall, in the kernel's own language's terms (a Gluon kernel's block constexprs by name)."""
    return s.gluon.format(blocks=e.larger_blocks) if e.gluon and s.gluon else s.change


def idle_share(e: Evidence, reason: str) -> float:
    """The share of ``reason``'s samples held by the warps of a warp-specialized kernel that are in no partition:
    they wait at a barrier on the kernel's own line for the whole run (padding to whole warpgroups), which no edit of
    the partitions' code changes. 0 where the kernel has no such warps or no per-line samples."""
    model = e.lines
    if not e.idle_warps or model is None or model.static:
        return 0.0
    total = sum(x.stalls.get(reason, 0.0) for x in model.lines)
    idle = sum(x.stalls.get(reason, 0.0) for x in model.lines if entry(x.code))
    return idle / total if total > 0 else 0.0


def tuned_without(e: Evidence, x: Line) -> tuple[str, float] | None:
    """Where the tuner timed the stage without line ``x``: its runner-up differs from the chosen configuration only
    in flags of a condition that holds ``x`` (``if STAGGER:``), true for the chosen and false for the runner-up.
    The words, and the time that variant saved (none where it ran slower): a measured route past the line, which
    caps what an item placed there can gain."""
    t = e.tuning or {}
    chosen, other, margin = t.get("chosen"), t.get("runner_up"), t.get("margin_pct")
    if not isinstance(chosen, dict) or not isinstance(other, dict) or not isinstance(margin, (int, float)):
        return None
    differ = {k for k in chosen.keys() | other.keys() if chosen.get(k) != other.get(k)}
    for condition in x.guards:
        if (
            differ
            and differ <= set(FLAG.findall(condition))
            and holds(condition, chosen)
            and holds(condition, other) is False
        ):
            flips = ", ".join(f"{k}={other.get(k)}" for k in sorted(differ))
            how = f"{margin:.1f}% faster" if margin >= 0 else f"{-margin:.1f}% slower"
            noise = ", within noise" if t.get("within_noise") else ""
            words = (
                f"the tuner timed {e.name} without this line ({flips}: its `if {condition}` false), "
                f"the chosen configuration {how}{noise}: the gain is capped at what that variant saved"
            )
            return words, e.us * max(0.0, -margin / 100.0)
    return None


WAITS = (".stall_", ".mbarrier_wait_share")  # the items about warps waiting at a line (stalls, mbarrier waits)


def routed(e: Evidence, o: Opportunity) -> Opportunity:
    """A wait item placed at a line the tuner timed the stage without (``tuned_without``), capped at what that
    variant saved."""
    if e.lines is None or o.line is None or not any(w in o.metric for w in WAITS):
        return o
    x = next((y for y in e.lines.lines if Path(y.file).name == o.file and y.line == o.line), None)
    if x is None or (route := tuned_without(e, x)) is None:
        return o
    words, saved = route
    capped = o.capped(e.gain(saved), "gain(tuned_saving_us)", tuned_saving_us=saved)
    return capped.model_copy(update={"change": f"{o.change}; {words}"})


def stalled(e: Evidence, left_pct: float) -> list[Opportunity]:
    """The stage's dominant stall reasons, each with ``left_pct`` (the share of the plan the named mechanisms leave
    of the stage's distance to its roof) times its share of the stalls; two reasons one line carries, whose
    instructions call for one change, are one item with both shares (one cause, not two items splitting it)."""
    stalls = {reason: per * (1.0 - idle_share(e, reason)) for reason, per in e.stalls.items()}
    total = sum(stalls.values())
    if total <= 0 or left_pct <= 0:
        return []
    digits = 0 if e.stall_unit.endswith("samples") else 1
    out: list[tuple[Opportunity, str | None]] = []
    wait = pipeline.waiting(e)  # an mbarrier wait the pipeline entry named: its samples are that item's
    for reason, per in sorted(stalls.items(), key=lambda kv: kv[1], reverse=True)[:MOST]:
        share = per / total
        if share < DOMINANT_SHARE:
            break
        if wait is not None and e.lines is not None and [x for x, _ in e.lines.carrying(reason)[:1]] == [wait]:
            continue  # the reason is the mbarrier wait's, already an item of its own (pipeline.starved)
        s = STALLS.get(reason, Stall(f"warps stall on {reason}", "see ncu mode's report-verbose.md"))
        line, found, at = carried(e, reason)  # the line(s) that carry the reason, what they are, the first
        if settled(found, e):
            continue  # every CTA resident at once, its loads issued once: nothing to bring forward
        # loads a loop issued in several rounds wait that many times; issued at once, once (where load_rounds counts
        # none, the stall's share stays: more warps hide the rounds)
        rounds = load_rounds(found, e)
        rounds = rounds if rounds is not None and rounds > 1.0 + ONE_ROUND else None
        issued = {} if rounds is None else {"rounds": rounds}  # the waits come in that many rounds: one is left
        if found is not None and found.what.startswith(MBARRIER):  # its try-wait counts as a long-scoreboard wait
            s = replace(s, mechanism="warps wait at an mbarrier for its phase to complete")
        where = line or (f" (hottest: {'; '.join(e.hot_executing)})" if e.hot_executing else "")
        if reason in SHARED_BOUND and e.shared_wavefronts:
            conflicts = 100.0 * (e.shared_conflicts or 0.0) / e.shared_wavefronts
            where += f"; bank conflicts add {conflicts:.0f}% of the shared-memory wavefronts"
        if reason in PIPE_BOUND and e.pipes:
            busiest = sorted(e.pipes.items(), key=lambda kv: kv[1], reverse=True)[:2]
            where += "; busiest pipes: " + ", ".join(
                f"{p} ({PIPE_WORDS.get(p, p)}) {v:.0f}% of peak" for p, v in busiest
            )
        item = Opportunity(
            name=f"Stall on {reason} in {e.where}: {s.mechanism} ({per:.{digits}f} of {total:.{digits}f} "
            f"{e.stall_unit}, {100 * share:.0f}%)" + (f"; the line is {found.what}" if found else ""),
            gain_pct=left_pct * share * (1.0 - 1.0 / rounds if rounds is not None else 1.0),
            metric=f"{e.name}.stall_{reason}",
            value=f"{per:.{digits}f}",
            change=f"{found.lever(e.gluon) if found else _lever(s, e)}{where}",
            named=True,
            stage=e.name,
            kernel=e.kernel_name,
            unit=e.stall_unit,
            formula=f"left_pct * {reason} / all_stalls" + (" * (1 - 1 / rounds)" if issued else ""),
            inputs={"left_pct": left_pct, reason: per, "all_stalls": total, **issued},
        ).at(at)
        # one cause: the same line (where it is known) and the same change its instructions call for
        key = f"{line.split(' (')[0]}|{found.change}" if found is not None and line else None
        twin = next((i for i, (_, k) in enumerate(out) if key is not None and k == key), None)
        if twin is None:
            out.append((item, key))
            continue
        first = out[twin][0]
        reasons = f"{first.metric.rsplit('stall_', 1)[1]} and {reason}"
        both = float(first.value) + per
        out[twin] = (
            first.model_copy(
                update={
                    "name": f"Stalls on {reasons} in {e.where}, carried by one line: {both:.{digits}f} of "
                    f"{total:.{digits}f} {e.stall_unit} ({100 * both / total:.0f}%)"
                    + (f"; the line is {found.what}" if found else ""),
                    "gain_pct": first.gain_pct + item.gain_pct,
                    "formula": f"{first.formula} + {item.formula}",  # one line: the same rounds, if any
                    "inputs": {**first.inputs, **item.inputs},
                }
            ),
            key,
        )
    return [o for o, _ in out]
