"""Opportunities: the diagnosis catalogue run over every stage, and the one ranking that turns its findings into Top 3.
Pure.

The catalogue's entries live by family in kbench.analysis.catalogue (memory, compute, launch, stalls); each names a
mechanism from what a mode measured of a stage (``Evidence``), with the measured value that triggered it, a gain
computed from measurements and capped by the stage's distance to its practical roof (the measured ceilings), and the
change to make in the kernel's own terms. Here: "at the practical roof: stop", the order the entries run in, the part
of the distance no entry explains (``unexplained``, with what would show it), and ``rank``. The gain models outside
the per-stage catalogue are kbench.analysis.gains's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kbench.analysis import bottleneck as b
from kbench.analysis import waterfall
from kbench.analysis.catalogue import (
    atomics,
    compute,
    exchange,
    issue,
    kernels,
    launch,
    lines,
    memory,
    pipeline,
    programs,
    routes,
    special,
    stalls,
)
from kbench.analysis.catalogue.compute import tensor_cores_idle
from kbench.analysis.catalogue.evidence import Evidence, Opportunity, finding, roof_words
from kbench.analysis.catalogue.launch import launch_bound, measured_tail, spills, tail, underfilled
from kbench.analysis.catalogue.memory import excess_traffic, uncoalesced
from kbench.analysis.waterfall import Waterfall

__all__ = [
    "Evidence", "Opportunity", "assess", "at_roof", "diagnose", "excess_traffic", "launch_bound", "measured_tail",
    "rank", "spills", "tail", "tensor_cores_idle", "uncoalesced", "underfilled", "unexplained",
]  # fmt: skip

TOP = 3
NEGLIGIBLE_PCT = 0.05  # an estimated gain below this shows as 0.0%: no item to act on


def at_roof(e: Evidence) -> Opportunity | None:
    bound = e.bound_us
    if bound is None or 100.0 * bound / e.us < b.AT_ROOF_PCT:
        return None
    pct = 100.0 * bound / e.us
    return finding(
        e,
        f"Stage {e.name} is at its practical roof ({pct:.0f}% of {roof_words(e)} this device reaches): stop",
        e.us - bound,
        (f"{e.name}.practical_roof_pct", f"{pct:.1f}%"),
        f"none in {e.name}; only moving fewer bytes or doing fewer FLOPs (fusing stages, a cheaper "
        "algorithm) makes it faster",
        stop=True,
        whole_stage=True,
    )


def _would_show(e: Evidence) -> str:
    """What would show where the rest of a stage's time goes, given what this mode measured."""
    if e.hot_lines:
        return (
            f"the stall reasons not named above and the hottest source lines (source/{e.name}.md, "
            "report-verbose.md) show where the rest goes"
        )
    if e.stalls:
        return f"--prof_type=ncu would show the source lines where {e.name}'s warps stall (source/{e.name}.md)"
    if e.moved_bytes is not None:
        return f"--prof_type=ncu would show {e.name}'s warp-stall reasons and hottest source lines"
    access = (
        ""
        if e.predicted is not None
        else "; on any machine, --prof_type=access predicts each load and store line's coalescing and masked lanes"
    )
    return (
        f"counters would show it: --prof_type=annotation measures {e.name}'s warp stalls, issued FLOPs and DRAM "
        f"bytes, and --prof_type=ncu its hottest source lines{access}"
    )


def unexplained(e: Evidence, explained_pct: float = 0.0) -> Opportunity | None:
    """The stage's distance to its practical roof less ``explained_pct`` (what the named mechanisms account for), and
    what would show where that time goes; None without a roof or when nothing is left."""
    bound = e.bound_us
    if bound is not None:
        pct = 100.0 * bound / e.us
        where, metric = f"{pct:.0f}% of its practical roof, {roof_words(e)}", "practical_roof_pct"
    elif (busiest := e.busiest_pct) is not None and explained_pct:
        # no FLOP/byte model: the busiest unit's headroom is the distance (gains.unit_headroom when nothing is named)
        pct, where, metric = busiest, f"its busiest unit at {busiest:.0f}% of peak, no FLOP/byte model", "busiest_pct"
    else:
        return None
    gap = e.gain(e.gap_us)
    left = gap - explained_pct
    if left < NEGLIGIBLE_PCT:
        return None
    if explained_pct:
        name = f"Unexplained in {e.name}: {left:.1f} of its {gap:.1f} points to the practical roof ({where}) are not "
        name += "accounted for by the steps of its distance (report.md's Distance)"
    else:
        name = f"Stage {e.name} runs at {where}; no mechanism found in this mode's data for its {gap:.1f} points"
    return Opportunity(
        name=name,
        gain_pct=left,
        metric=f"{e.name}.{metric}",
        value=f"{pct:.1f}%",
        change=_would_show(e),
        rest=True,
        stage=e.name,
        kernel=e.kernel_name,
        formula="100 * gap_us / total_us - explained_pct",
        inputs={**e.gain_inputs(), "explained_pct": explained_pct},
    )


# The catalogue, by family, in the order its entries run (kbench.analysis.catalogue; docs/diagnosis.md's table).
CATALOGUE: tuple[Callable[[Evidence], Opportunity | None], ...] = (
    launch.spills,
    launch.underfilled,
    launch.tail,
    programs.uneven_programs,
    programs.idle_sms,
    launch.launch_bound,
    compute.tensor_cores_idle,
    compute.tensor_precision,
    compute.warp_mma,
    compute.narrow_tiles,
    compute.unpipelined,
    routes.serialized_wgmma,
    compute.excess_work,
    compute.repeated_by_warpgroups,
    compute.fp64_math,
    special.xu_bound,
    compute.few_warps,
    pipeline.starved,
    issue.issue_bound,
    exchange.exchanged,
    memory.excess_traffic,
    memory.uncoalesced,
    memory.masked_lanes,
    memory.touched_beyond_model,
    memory.few_bytes_in_flight,
    atomics.contention,
    kernels.undeclared,
)
# entries about time outside the stage's Duration (host time where CUPTI timed the kernels): not part of its
# distance to the roof, so said even at the roof and not counted against what the roof leaves unexplained
OUTSIDE: tuple[Callable[[Evidence], Opportunity | None], ...] = (kernels.host_time,)


def assess(e: Evidence) -> tuple[list[Opportunity], Waterfall | None]:
    """The catalogue's findings for one stage and its distance waterfall: "stop" when it is at its practical roof;
    else every mechanism its evidence triggers, then its dominant warp stalls over what those leave of the distance
    to the roof, the hottest source line where those explain less than half of it, the work beyond the model the
    waterfall prices where no entry names it, each held to its step of the waterfall; then what the waterfall leaves
    unexplained and what would show it; the items about the stage outside its kernels' work (host time) whatever
    its roof."""
    outside = [o for check in OUTSIDE if (o := check(e)) is not None]
    if (done := at_roof(e)) is not None:
        return [done, *outside], waterfall.build(e, [])[0]
    # a wait the tuner timed the stage without is capped at what that saved (stalls.routed), before the stalls share
    # what the named items leave
    found = [stalls.routed(e, lines.attributed(e, o)) for check in CATALOGUE if (o := check(e)) is not None]
    gap = e.gain(e.gap_us)
    found += [stalls.routed(e, o) for o in stalls.stalled(e, gap - sum(o.gain_pct for o in found))]
    named = sum(o.gain_pct for o in found)
    if (line := lines.hottest(e, gap - named, named)) is not None:  # the rest unnamed: the line that holds it
        found.append(line)
    fall, added = waterfall.build(e, found)
    if fall is not None:
        found = waterfall.held([*found, *added], fall)
        explained = max(0.0, fall.gap_points - fall.unexplained_points)
    else:
        explained = sum(o.gain_pct for o in found)
    rest = unexplained(e, explained)
    if rest is not None and fall is not None and fall.counted:
        rest = rest.model_copy(update={"counted": True})
    return [*found, *([rest] if rest is not None else []), *outside], fall


def diagnose(e: Evidence) -> list[Opportunity]:
    """The catalogue's findings for one stage (``assess`` without its waterfall)."""
    return assess(e)[0]


def rank(
    candidates: Sequence[Opportunity | None],
    *,
    fewer: Callable[[int], str],
    none: tuple[Opportunity, str] | None = None,
) -> tuple[list[Opportunity], str | None]:
    """The Top 3 by estimated gain, and the note a report shows under them: ``fewer(n)`` when fewer than three
    are left, ``none`` (a placeholder and its note) when there is none at all. An item whose gain rounds to 0.0%
    is left out (the note names it) unless it is a "stop" line, or nothing else is left. The items no edit of the
    kernel reaches (``structural``) are said in the note, with what would reach them, unless nothing else is left."""
    every = sorted((c for c in candidates if c is not None), key=lambda o: o.gain_pct, reverse=True)
    # where counters measured a stage, its unexplained rest is said under the list, never an item to act on
    listed = [o for o in every if not o.structural and not (o.rest and o.counted)] or every
    found = [o for o in listed if o.stop or o.gain_pct >= NEGLIGIBLE_PCT][:TOP] or listed[:1]
    if not found and none is not None:
        return [none[0]], none[1]
    # what no item explains, and what no edit reaches, is always said: under the list when not in the top three
    unsaid = [o for o in every if (o.rest or o.structural) and o not in found and o.gain_pct >= NEGLIGIBLE_PCT]
    rest = " ".join(
        f"{'Structural (no edit of the kernel as written reaches it): ' if o.structural else ''}{o.name} "
        f"(est. {o.gain_pct:.1f}%): {o.change}."
        for o in unsaid
    )
    if len(found) == TOP:
        return found, rest or None
    left = [o.name for o in listed if o not in found and o not in unsaid]
    out = f" Left out, each under {NEGLIGIBLE_PCT}% of the plan's time: {'; '.join(left)}." if left else ""
    return found, fewer(len(found)) + out + (f" {rest}" if rest else "")
