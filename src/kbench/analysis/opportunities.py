"""Opportunities: the gain models every mode draws on, and the one ranking that turns them into Top 3. Pure.

Each gain model turns measured figures into candidate changes with an estimated gain (percent of the plan's
time) and the metric that triggered it:
- ``roof_gap``: a stage's distance to its roofline bound (the share of plan time it would save on the roof);
- ``unit_headroom``: without a FLOP/byte model, the headroom of a stage's busiest unit to its peak;
- ``ncu_rule``: an Nsight Compute rule's own estimated speedup, weighted by the stage's share;
- ``gpu_idle`` and ``unused_overlap``: a timeline's idle GPU time, and the overlap a concurrent plan leaves.
``rank`` sorts them and keeps three, saying why when fewer are left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel

from kbench.analysis import roofline as rl
from kbench.analysis.counters import StageCounters
from kbench.analysis.ncu import Rule
from kbench.analysis.stages import StageFigures
from kbench.analysis.timeline_stages import TimelineAnalysis

TOP = 3


class Opportunity(BaseModel):
    name: str
    gain_pct: float
    metric: str
    value: str


def roof_gap(f: StageFigures, c: rl.Ceilings, total_us: float, measured: bool) -> Opportunity:
    """Bring a stage with an analytic model to its roof (``measured``: ceilings measured on an unknown device)."""
    assert f.flops is not None and f.dram_bytes is not None  # a stage on the roofline has the analytic model
    bound = rl.bound_us(c, f.flops, f.dram_bytes)
    return Opportunity(
        name=f"Bring stage {f.name} to its {'measured ' if measured else ''}"
        f"{rl.limiting_roof(c, f.flops, f.dram_bytes)} roof",
        gain_pct=max(0.0, 100.0 * (f.duration_us - bound) / total_us),
        metric=f"{f.name}.{'measured_roof' if measured else 'roofline'}_efficiency",
        value=f"{100.0 * bound / f.duration_us:.1f}%",
    )


def unit_headroom(c: StageCounters, share: float) -> Opportunity | None:
    """Raise a counted stage's busiest unit (DRAM or compute) toward its peak; None when no unit was read."""
    busiest = max((v for v in (c.compute_pct, c.dram_pct) if v is not None), default=None)
    if busiest is None:
        return None
    unit, metric = ("DRAM", "dram_pct") if busiest == c.dram_pct else ("compute", "compute_pct")
    return Opportunity(
        name=f"Raise {unit} throughput of stage {c.stage} toward its peak",
        gain_pct=max(0.0, (100.0 - busiest) * share),
        metric=f"{c.stage}.{metric}",
        value=f"{busiest:.1f}%",
    )


def ncu_rule(stage: str, r: Rule, share: float) -> Opportunity | None:
    """An ncu rule with a speedup estimate; None for rules without one."""
    if r.speedup_pct is None:
        return None
    metric, value = r.focus[0] if r.focus else ("gpu__time_duration.sum", "n/a")
    shown = f"{value:.4g}" if isinstance(value, float) else str(value).replace(" ", "_") or "n/a"
    return Opportunity(
        name=f"{r.title or r.rule_id} in {stage} (ncu {r.rule_id}, {r.speedup_type} speedup)",
        gain_pct=r.speedup_pct * share,
        metric=metric,
        value=shown,
    )


def gpu_idle(a: TimelineAnalysis) -> Opportunity | None:
    """Close the GPU's idle time inside each iteration; None when it never idled."""
    idle = a.idle_pct
    if idle <= 0:
        return None
    return Opportunity(
        name="Close the GPU's idle time in each iteration (fewer launches or syncs, CUDA graphs)",
        gain_pct=idle,
        metric="plan.gpu_idle_pct",
        value=f"{idle:.1f}%",
    )


def unused_overlap(a: TimelineAnalysis) -> Opportunity | None:
    """Overlap a concurrent plan's stages up to the critical path; None for a serial plan or one already there."""
    o = a.overlap
    if o is None or o.together_us <= o.ideal_us:
        return None
    return Opportunity(
        name=f"Overlap the concurrent stages up to the critical path ({o.ideal_us:.1f} us)",
        gain_pct=100.0 * (o.together_us - o.ideal_us) / o.together_us,
        metric="plan.overlap_achieved",
        value="n/a" if o.achieved_pct is None else f"{o.achieved_pct:.1f}%",
    )


def rank(
    candidates: Sequence[Opportunity | None],
    *,
    fewer: Callable[[int], str],
    none: tuple[Opportunity, str] | None = None,
) -> tuple[list[Opportunity], str | None]:
    """The Top 3 by estimated gain, and the note a report shows under them: ``fewer(n)`` when fewer than three
    are left, ``none`` (a placeholder and its note) when there is none at all."""
    found = sorted((c for c in candidates if c is not None), key=lambda o: o.gain_pct, reverse=True)[:TOP]
    if not found and none is not None:
        return [none[0]], none[1]
    return found, (fewer(len(found)) if len(found) < TOP else None)
