"""Opportunities: the diagnosis catalogue and the gain models every mode draws on, and the one ranking that turns
them into Top 3. Pure.

The catalogue (``diagnose``) names a mechanism from what a mode measured of a stage (``Evidence``), with the
measured value that triggered it, a gain computed from measurements and capped by the stage's distance to its
practical roof (the measured ceilings), and the change to make in the kernel's own terms:
- at the practical roof: stop (the stage is within AT_ROOF_PCT of what the device reaches);
- register spills (local-memory traffic, or the compiler's spill count);
- an underfilled grid (fewer CTAs than SMs: SMs idle);
- a partial last wave (tail effect) from the grid, the CTAs an SM holds and the SM count;
- DRAM traffic beyond the plan's compulsory bytes on a memory-limited stage;
- otherwise the stage's distance to its practical roof, saying no mechanism was found in this mode's data.
The gain models outside the per-stage catalogue are kbench.analysis.gains's. ``rank`` sorts every candidate and
keeps three, saying why when fewer are left.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kbench.analysis import bottleneck as b
from kbench.analysis import roofline as rl
from kbench.analysis.stages import StageFigures
from kbench.model import Model

TOP = 3
NEGLIGIBLE_PCT = 0.05  # an estimated gain below this shows as 0.0%: no item to act on


class Opportunity(Model):
    name: str
    gain_pct: float
    metric: str
    value: str
    change: str | None = None  # what to change in the kernel (the report's `   change:` line)
    named: bool = False  # the catalogue named the mechanism (or that the stage is done) from this run's data
    stop: bool = False  # the stage is at its practical roof: listed whatever its gain


@dataclass(frozen=True)
class Evidence:
    """What a mode measured of one stage, for the catalogue (None: this mode did not measure it)."""

    stage: StageFigures
    total_us: float  # the plan's time: every gain is a share of it
    practical: rl.Ceilings | None  # the practical roof of the stage's precision (measured ceilings)
    sm_count: int | None = None
    ctas: int | None = None  # the grid of its (longest) kernel
    ctas_per_sm: float | None = None  # how many of those CTAs one SM holds at once
    ctas_limiter: str | None = None  # what caps them: registers, shared memory, warps, blocks
    launches: int | None = None  # kernels the stage launches per run
    ld_sectors: float | None = None  # 32-byte sectors global loads / stores touched (ncu)
    st_sectors: float | None = None
    ld_use: float | None = None  # bytes of each such sector the instructions used, of 32 (ncu)
    st_use: float | None = None
    registers: float | None = None  # per thread
    warps: int | None = None  # per CTA
    spilled: float | None = None  # the compiler's spill count (Triton)
    spill_bytes: float | None = None  # local-memory traffic counted by ncu
    moved_bytes: float | None = None  # DRAM bytes counted by ncu
    tensor_cores: bool | None = None  # tensor-core work seen (ncu's tensor FLOPs, or mma in the kernel's PTX)
    stalls: dict[str, float] = field(default_factory=dict)  # warp-stall reason -> stalled warps per issue (ncu)
    stall_unit: str = "stalled warps per issued instruction"  # what ``stalls`` counts (PC sampling: samples)
    hot_lines: tuple[str, ...] = ()  # the source lines with the most stall samples (ncu mode)
    config: str = ""  # its launch configuration, as the report shows it
    tail_idle_pct: float | None = None  # SM time idle after each SM's last CTA, of SMs x span (intra timeline)
    cta_imbalance: float | None = None  # slowest CTA over the mean CTA (intra timeline)

    @property
    def name(self) -> str:
        return self.stage.name

    @property
    def us(self) -> float:
        return self.stage.duration_us

    @property
    def bound_us(self) -> float | None:
        """The stage's time on its practical roof, with the plan's FLOP/byte model."""
        s = self.stage
        if self.practical is None or s.flops is None or s.dram_bytes is None:
            return None
        return rl.bound_us(self.practical, s.flops, s.dram_bytes)

    def gain(self, saved_us: float) -> float:
        """``saved_us`` of this stage as a share of the plan, never beyond its distance to the practical roof."""
        bound = self.bound_us
        cap = self.us - bound if bound is not None else self.us
        return 100.0 * max(0.0, min(saved_us, cap)) / self.total_us


def _finding(
    e: Evidence, name: str, saved_us: float, trigger: tuple[str, str], change: str, stop: bool = False
) -> Opportunity:
    """A mechanism the catalogue named: ``saved_us`` of the stage as a share of the plan, capped by its roof."""
    return Opportunity(
        name=name, gain_pct=e.gain(saved_us), metric=trigger[0], value=trigger[1], change=change, named=True, stop=stop
    )


def _roof_words(e: Evidence) -> str:
    c, s = e.practical, e.stage
    assert c is not None and s.flops is not None and s.dram_bytes is not None
    if rl.limiting_roof(c, s.flops, s.dram_bytes) == "memory":
        return f"{c.gbps:g} GB/s DRAM"
    return f"{c.tflops:g} TFLOP/s {s.precision}"


def at_roof(e: Evidence) -> Opportunity | None:
    bound = e.bound_us
    if bound is None or 100.0 * bound / e.us < b.AT_ROOF_PCT:
        return None
    pct = 100.0 * bound / e.us
    return _finding(
        e,
        f"Stage {e.name} is at its practical roof ({pct:.0f}% of {_roof_words(e)} this device reaches): stop",
        e.us - bound,
        (f"{e.name}.practical_roof_pct", f"{pct:.1f}%"),
        f"none in {e.name}; only moving fewer bytes or doing fewer FLOPs (fusing stages, a cheaper "
        "algorithm) makes it faster",
        stop=True,
    )


def spills(e: Evidence) -> Opportunity | None:
    if e.spill_bytes:
        # time that moved the spilled values: the local traffic's share of all bytes the stage moved
        saved = e.us * e.spill_bytes / (e.spill_bytes + (e.moved_bytes or 0.0))
        metric, value = f"{e.name}.local_memory_bytes", f"{e.spill_bytes:.3g}"
    elif e.spilled:
        # only the compiler's count: the distance to the practical roof in proportion to the spilled values
        # against those the registers hold (788 spilled on 255 registers: all of it; 2 on 255: under 1%, which
        # the H100 showed harmless: mla_decode v2's fastest tile spills 2)
        share = min(1.0, e.spilled / e.registers) if e.registers else 1.0
        gap = e.us - e.bound_us if e.bound_us is not None else e.us
        saved, metric, value = max(0.0, gap) * share, f"{e.name}.spilled_registers", f"{e.spilled:.0f}"
    else:
        return None
    regs = f"{e.registers:.0f} registers per thread" if e.registers else "its registers"
    warps = f" on {e.warps} warps" if e.warps else ""
    return _finding(
        e,
        f"Register spills in {e.name}: {regs}{warps} cannot hold the tile, values go through local memory",
        saved,
        (metric, value),
        f"hold fewer values per thread in {e.name}: smaller BLOCK tiles, or more num_warps for the same "
        f"tile{f' (now {e.config})' if e.config else ''}, until the compiler reports no spills",
    )


def underfilled(e: Evidence) -> Opportunity | None:
    if not e.ctas or not e.sm_count or e.ctas >= e.sm_count:
        return None
    bound = e.bound_us or 0.0
    saved = e.us - max(bound, e.us * e.ctas / e.sm_count)  # the same work spread over every SM
    return _finding(
        e,
        f"Underfilled grid in {e.name}: {e.ctas} CTAs on {e.sm_count} SMs leave {e.sm_count - e.ctas} SMs idle",
        saved,
        (f"{e.name}.grid_ctas", str(e.ctas)),
        f"launch at least {e.sm_count} CTAs in {e.name}: split each CTA's loop over more CTAs (split-K / "
        "split-KV, partial results combined by atomics or a second stage), or use smaller blocks",
    )


def tail(e: Evidence) -> Opportunity | None:
    """A last wave that leaves SM slots empty costs its share of a wave's time where each CTA's own speed sets the
    time (compute or latency); a memory-bound stage is left out: its last CTAs share the DRAM with fewer others.
    Where the intra timeline measured the SMs' idle tail, that measurement is the loss instead of the model."""
    if e.tail_idle_pct is not None:
        return measured_tail(e, e.tail_idle_pct)
    if not e.ctas or not e.sm_count or not e.ctas_per_sm or e.ctas < e.sm_count or e.stage.bottleneck == "Memory":
        return None
    slots = e.sm_count * e.ctas_per_sm
    waves = e.ctas / slots
    full = math.ceil(waves)
    loss = (full - waves) / full if waves > 1 else 0.0
    if 100.0 * loss < b.TAIL_LOSS_PCT:
        return None
    held = f"{e.ctas_per_sm:.0f} per SM{f', limited by {e.ctas_limiter}' if e.ctas_limiter else ''}"
    return _finding(
        e,
        f"Partial last wave in {e.name}: {e.ctas} CTAs fill {waves:.2f} waves of {slots:.0f} "
        f"({held}, on {e.sm_count} SMs)",
        e.us * loss,
        (f"{e.name}.waves", f"{waves:.2f}"),
        f"make {e.name}'s grid a multiple of {slots:.0f} CTAs (a persistent grid of {slots:.0f}, or a BLOCK "
        "size that divides the work into whole waves)",
    )


def measured_tail(e: Evidence, idle_pct: float) -> Opportunity | None:
    """SMs that finished their last CTA wait for the slowest SM: the stage could end when the mean SM ends, if its
    work were spread evenly (whole waves, CTAs of equal length)."""
    if idle_pct < b.TAIL_LOSS_PCT:
        return None
    waves = ""
    if e.ctas and e.sm_count and e.ctas_per_sm:
        waves = f"; {e.ctas} CTAs fill {e.ctas / (e.sm_count * e.ctas_per_sm):.2f} waves"
    uneven = f"; the slowest CTA took {e.cta_imbalance:.2f}x the mean" if (e.cta_imbalance or 0) >= 1.1 else ""
    return _finding(
        e,
        f"SMs idle at the end of {e.name}: {idle_pct:.1f}% of its SM time passed after an SM's last CTA ended "
        f"(measured){waves}{uneven}",
        e.us * idle_pct / 100.0,
        (f"{e.name}.tail_idle_pct", f"{idle_pct:.1f}%"),
        f"even out {e.name}'s work over the SMs: a grid of whole waves (a persistent grid looping over tiles), "
        "smaller tiles for a finer last wave, or splitting the longest CTAs' work",
    )


def tensor_cores_idle(e: Evidence) -> Opportunity | None:
    s = e.stage
    if e.tensor_cores is not False or s.precision not in b.TENSOR_PRECISIONS or e.bound_us is None:
        return None
    if s.intensity is None or s.intensity < b.MATMUL_SHAPED_INTENSITY:
        return None
    return _finding(
        e,
        f"Tensor cores idle in {e.name}: {s.flops:.3g} {s.precision} FLOPs at {s.intensity:.0f} FLOP/B run on the "
        "CUDA cores",
        e.us - e.bound_us,
        (f"{e.name}.tensor_core_work", "none"),
        f"compute {e.name}'s products with tl.dot: {s.precision} tiles of A (BLOCK_M x BLOCK_K) and B (BLOCK_K x "
        "BLOCK_N), accumulated in fp32",
    )


def excess_traffic(e: Evidence) -> Opportunity | None:
    s = e.stage
    if not e.moved_bytes or not s.dram_bytes or e.moved_bytes < b.EXCESS_TRAFFIC * s.dram_bytes:
        return None
    if s.bottleneck != "Memory":
        return None  # the extra bytes cost time only where DRAM sets it
    return _finding(
        e,
        f"DRAM traffic in {e.name} is {e.moved_bytes / s.dram_bytes:.2f}x the compulsory bytes: data is "
        "fetched more than once",
        e.us * (1.0 - s.dram_bytes / e.moved_bytes),
        (f"{e.name}.dram_bytes_over_model", f"{e.moved_bytes / s.dram_bytes:.2f}x"),
        f"make {e.name} read each input once: larger tiles or a GROUP_M-style swizzle so neighbouring CTAs "
        "share tiles in L2, or fuse the passes that re-read the same data",
    )


def launch_bound(e: Evidence) -> Opportunity | None:
    """Many short kernels: the launches, not the GPU's work, set the stage's time. Fused into one launch it would
    take its roof time, or at least one of today's launches."""
    if not e.launches or e.launches < b.MANY_LAUNCHES or e.us / e.launches >= b.SHORT_LAUNCH_US:
        return None
    per = e.us / e.launches
    saved = e.us - max(e.bound_us or 0.0, per)
    if saved < e.us / 2:
        return None  # the work, not the launches, takes most of the time
    return _finding(
        e,
        f"Launch-bound stage {e.name}: {e.launches} kernel launches of {per:.1f} us each",
        saved,
        (f"{e.name}.launches", str(e.launches)),
        f"launch {e.name}'s work as one kernel: move the host loop that launches it into the grid (one more grid "
        "axis, or a loop inside the kernel); where launches must stay separate, capture them in a CUDA graph",
    )


def uncoalesced(e: Evidence) -> Opportunity | None:
    """Global loads or stores that use few bytes of each 32-byte sector they touch; coalesced, the same data
    takes (used / 32) of the sectors, and the stage's time shrinks with its sector traffic (capped by its roof)."""
    kinds = [
        (what, sectors, use)
        for what, sectors, use in (("loads", e.ld_sectors, e.ld_use), ("stores", e.st_sectors, e.st_use))
        if sectors and use
    ]
    if not kinds:
        return None
    what, _, worst = min(kinds, key=lambda k: k[2])
    if worst >= b.COALESCED_BYTES_PER_SECTOR:
        return None
    total = sum(sectors for _, sectors, _ in kinds)
    needed = sum(sectors * use / 32.0 for _, sectors, use in kinds)
    op = "ld" if what == "loads" else "st"
    return _finding(
        e,
        f"Uncoalesced global {what} in {e.name}: {worst:.1f} of every 32 bytes they fetch are used",
        e.us * (1.0 - needed / total),
        (f"{e.name}.global_{op}_bytes_per_sector", f"{worst:.1f}"),
        f"make neighbouring threads of {e.name} touch neighbouring addresses: index the contiguous dimension with "
        "the fastest-varying tl.arange (load tiles row by row and transpose them on chip with tl.trans), or store "
        "the tensor in the layout the kernel walks",
    )


# What a warp-stall reason means for the kernel, and what usually removes it.
STALL_ADVICE = {
    "long_scoreboard": "waiting on global or local memory loads: more loads in flight (num_stages, more CTAs per SM, "
    "fewer registers) or fewer loads (reuse tiles in shared memory)",
    "barrier": "waiting at barriers: uneven work between the warps of a CTA, or too little work between barriers",
    "short_scoreboard": "waiting on shared memory or special-function results: fewer shared-memory round trips, no "
    "bank conflicts",
    "mio_throttle": "the memory-instruction queue is full: fewer, wider (vectorized) memory instructions",
    "lg_throttle": "the global/local memory queue is full: fewer, wider loads and stores, no local memory",
    "math_pipe_throttle": "an arithmetic pipe is saturated: tensor cores (tl.dot) or cheaper math",
    "wait": "fixed-latency dependencies: more independent work per thread or more warps",
    "not_selected": "warps are ready but the issue slots are full: the kernel is issue-bound, fewer instructions",
    "dispatch_stall": "the dispatcher stalls: often a pipeline contention (ncu mode's report-verbose.md: the pipes)",
    "gmma": "waiting on warpgroup MMA (wgmma) results: deeper pipelining of the tensor-core work",
}


def unexplained(e: Evidence, explained_pct: float = 0.0) -> Opportunity | None:
    """The stage's distance to its practical roof less ``explained_pct`` (what named mechanisms account for), with
    what is known of where the time goes: ncu's dominant warp stall and hottest lines, when measured."""
    bound = e.bound_us
    if bound is None:
        return None
    pct = 100.0 * bound / e.us
    gap = e.gain(e.us - bound)
    change = (
        f"find where {e.name}'s time goes: its warp-stall reasons and hottest source lines (--prof_type=ncu writes "
        f"them to source/{e.name}.md)"
    )
    why = "no mechanism found in this mode's data"
    if e.stalls:
        reason, per = max(e.stalls.items(), key=lambda kv: kv[1])
        digits = 0 if e.stall_unit.endswith("samples") else 1
        why = f"its warps stall most on {reason} ({per:.{digits}f} of {sum(e.stalls.values()):.{digits}f} "
        why += f"{e.stall_unit})"
        where = f" at {'; '.join(e.hot_lines)}" if e.hot_lines else ""
        advice = STALL_ADVICE.get(reason, f"ncu mode's report-verbose.md says what {reason} means")
        change = f"{advice}{where}"
    if explained_pct:
        why = f"the mechanisms named explain only {explained_pct:.1f} of its {gap:.1f} points"
    return Opportunity(
        name=f"Stage {e.name} runs at {pct:.0f}% of its practical roof ({_roof_words(e)}); {why}",
        gain_pct=gap - explained_pct,
        metric=f"{e.name}.practical_roof_pct",
        value=f"{pct:.1f}%",
        change=change,
    )


CATALOGUE: tuple[Callable[[Evidence], Opportunity | None], ...] = (
    spills,
    underfilled,
    tail,
    tensor_cores_idle,
    excess_traffic,
    launch_bound,
    uncoalesced,
)


def diagnose(e: Evidence) -> list[Opportunity]:
    """The catalogue's findings for one stage: "stop" when it is at its practical roof, else every mechanism
    its evidence triggers, plus the rest of its distance to the practical roof when no mechanism was named or
    the named ones explain the smaller part of it."""
    if (done := at_roof(e)) is not None:
        return [done]
    found = [o for check in CATALOGUE if (o := check(e)) is not None]
    rest = unexplained(e, sum(o.gain_pct for o in found))
    # what the named mechanisms leave of the distance to the roof is listed when it is the larger part
    if rest is None or (found and rest.gain_pct <= max(o.gain_pct for o in found)):
        return found
    return [*found, rest]


def rank(
    candidates: Sequence[Opportunity | None],
    *,
    fewer: Callable[[int], str],
    none: tuple[Opportunity, str] | None = None,
) -> tuple[list[Opportunity], str | None]:
    """The Top 3 by estimated gain, and the note a report shows under them: ``fewer(n)`` when fewer than three
    are left, ``none`` (a placeholder and its note) when there is none at all. An item whose gain rounds to 0.0%
    is left out (the note names it) unless it is a "stop" line, or nothing else is left."""
    listed = sorted((c for c in candidates if c is not None), key=lambda o: o.gain_pct, reverse=True)
    found = [o for o in listed if o.stop or o.gain_pct >= NEGLIGIBLE_PCT][:TOP] or listed[:1]
    if not found and none is not None:
        return [none[0]], none[1]
    if len(found) == TOP:
        return found, None
    left = [o.name for o in listed if o not in found]
    out = f" Left out, each under {NEGLIGIBLE_PCT}% of the plan's time: {'; '.join(left)}." if left else ""
    return found, fewer(len(found)) + out
