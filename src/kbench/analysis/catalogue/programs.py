"""Time by program: how evenly a stage's programs (CTAs) share its work, and the item when the longest programs, not
DRAM or the compute units, set the stage's end. The work per program is an access run's prediction (the bytes each
traced program's active lanes load and store, kbench.analysis.access.program_work); the intra timeline measures each
CTA instead (kbench.analysis.catalogue.launch.measured_tail names the longest); ncu's counters measure how busy the
average SM was against the busiest (``idle_sms``). Pure."""

from __future__ import annotations

import math

from kbench.analysis import bottleneck as b
from kbench.analysis.catalogue.evidence import Evidence, Opportunity, finding
from kbench.analysis.catalogue.issue import roof_fractions


def loss(spread: float, w: float | None) -> float:
    """The share of the stage's time that evened work would save. One wave or less: the stage ends with its longest
    program, evened it would end with the mean one (1 - mean / max). More waves (the makespan model): today the
    earlier waves take the mean program's time each and the last ends on the longest, mean x (w - 1) + max;
    evened, mean x w."""
    w = max(1.0, w or 1.0)
    return (spread - 1.0) / (w - 1.0 + spread)


def uneven_programs(e: Evidence) -> Opportunity | None:
    p = e.predicted
    spread = p.program_spread if p is not None else None
    if p is None or spread is None or spread < b.UNEVEN_PROGRAMS or e.tail_idle_pct is not None:
        return None
    compute, memory = roof_fractions(e)
    if max(compute, memory) >= b.UNIT_SETS_TIME_PCT:
        return None
    w = e.waves
    model = "one wave: 1 - mean / max" if w is None or w <= 1.0 else f"{w:.2f} waves: the makespan model"
    longest = f"; largest {', '.join(p.longest_programs)}" if p.longest_programs else ""
    occ, cap = e.stage.occ_pct, e.theoretical_occupancy_pct
    occupancy = f"; achieved occupancy {occ:.0f}% of the theoretical {cap:.0f}%" if occ and cap else ""
    return finding(
        e,
        f"Uneven programs in {e.name}: its largest program loads and stores {spread:.2f}x the mean program's bytes "
        f"(predicted on CPU, {p.where}{longest}); the longest programs, not DRAM ({memory:.0f}% of its roof) or the "
        f"compute units ({compute:.0f}%), set its end ({model}){occupancy}",
        e.us * loss(spread, w),
        (f"{e.name}.program_work_max_over_mean", f"{spread:.2f}"),
        EVEN_CHANGE.format(name=e.name),
        whole_stage=True,
    )


EVEN_CHANGE = (
    "even {name}'s work per program: split the longest programs' loops over more programs, pair each long program "
    "with a short one (program i with program n-1-i in one CTA), or take the work longest-first from a persistent "
    "grid of one CTA per SM slot"
)


def idle_sms(e: Evidence) -> Opportunity | None:
    """Counters: the SMs idle while the longest programs run. ncu's sm__cycles_active (avg over max) is how busy the
    average SM was against the busiest one; uniform programs keep it near the share the grid's waves allow (w / ceil w
    past one wave, every SM busy within one). Evened, the stage would end with the average SM: it saves the time x
    (1 - busy / allowed). Silent where an access prediction or the intra timeline speaks for the programs, where the
    grid leaves SMs without a CTA (the underfilled-grid item), and where DRAM or the compute units set the time."""
    busy = e.sm_busy_pct
    if busy is None or e.tail_idle_pct is not None or (e.predicted is not None and e.predicted.program_spread):
        return None
    if not e.ctas or not e.sm_count or e.ctas < e.sm_count:
        return None
    w = e.waves
    allowed = 100.0 * (w / math.ceil(w) if w is not None and w > 1.0 else 1.0)
    if busy >= b.SM_BUSY_SHARE * allowed:
        return None
    compute, memory = roof_fractions(e)
    if max(compute, memory) >= b.UNIT_SETS_TIME_PCT:
        return None
    occ, cap = e.stage.occ_pct, e.theoretical_occupancy_pct
    occupancy = f"; achieved occupancy {occ:.0f}% of the theoretical {cap:.0f}%" if occ and cap else ""
    return finding(
        e,
        f"SMs idle while the longest programs run in {e.where}: the average SM was busy {busy:.1f}% of the busiest "
        f"SM's cycles (sm__cycles_active avg / max) where {e.ctas} even programs would keep {allowed:.0f}%; the "
        f"longest programs, not DRAM ({memory:.0f}% of its roof) or the compute units ({compute:.0f}%), set its "
        f"end{occupancy}",
        e.us * (1.0 - busy / allowed),
        (f"{e.name}.sm_busy_pct", f"{busy:.1f}%"),
        EVEN_CHANGE.format(name=e.name)
        + "; --prof_type=access predicts each program's bytes and names the largest programs",
    )
