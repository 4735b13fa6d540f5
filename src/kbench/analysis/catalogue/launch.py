"""The launch and occupancy family: register spills, an underfilled grid, a partial last wave (modelled, or measured
by the intra timeline) and stages whose launches, not their work, take the time. Pure."""

from __future__ import annotations

import math

from kbench.analysis import bottleneck as b
from kbench.analysis.catalogue.evidence import ALONE_SHARE, Evidence, Opportunity, finding


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
    return finding(
        e,
        f"Register spills in {e.where}: {regs}{warps} cannot hold the tile, values go through local memory",
        saved,
        (metric, value),
        f"hold fewer values per thread in {e.name}: smaller block constexprs or layouts that spread a tile over more "
        "threads, more warps for the same tile, or a larger register budget for the partition that spills "
        f"(warp_specialize's worker registers){f' (now {e.config})' if e.config else ''}, until the compiler reports "
        "no spills"
        if e.gluon
        else f"hold fewer values per thread in {e.name}: smaller BLOCK tiles, or more num_warps for the same "
        f"tile{f' (now {e.config})' if e.config else ''}, until the compiler reports no spills",
    )


def underfilled(e: Evidence) -> Opportunity | None:
    if not e.ctas or not e.sm_count or e.ctas >= e.sm_count:
        return None
    # the same work spread over every SM, at most down to the roof; the stage's roof is its whole work's, so a kernel
    # that holds only part of the stage is bounded by its own spread alone (the stage's gap still caps the gain)
    bound = (e.bound_us or 0.0) if e.share >= ALONE_SHARE else 0.0
    saved = e.us - max(bound, e.us * e.ctas / e.sm_count)
    return finding(
        e,
        f"Underfilled grid in {e.where}: {e.ctas} CTAs on {e.sm_count} SMs leave {e.sm_count - e.ctas} SMs idle",
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
    return finding(
        e,
        f"Partial last wave in {e.where}: {e.ctas} CTAs fill {waves:.2f} waves of {slots:.0f} "
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
    if uneven and e.longest_programs:
        uneven += f" (longest: {', '.join(e.longest_programs)})"
    return finding(
        e,
        f"SMs idle at the end of {e.name}: {idle_pct:.1f}% of its SM time passed after an SM's last CTA ended "
        f"(measured){waves}{uneven}",
        e.us * idle_pct / 100.0,
        (f"{e.name}.tail_idle_pct", f"{idle_pct:.1f}%"),
        f"even out {e.name}'s work over the SMs: a grid of whole waves (a persistent grid looping over tiles), "
        "smaller tiles for a finer last wave, or splitting the longest CTAs' work"
        + (" (the CTAs named: launch them first, or pair each with a short one)" if "longest:" in uneven else ""),
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
    return finding(
        e,
        f"Launch-bound stage {e.name}: {e.launches} kernel launches of {per:.1f} us each",
        saved,
        (f"{e.name}.launches", str(e.launches)),
        f"launch {e.name}'s work as one kernel: move the host loop that launches it into the grid (one more grid "
        "axis, or a loop inside the kernel); where launches must stay separate, capture them in a CUDA graph",
        whole_stage=True,
    )
