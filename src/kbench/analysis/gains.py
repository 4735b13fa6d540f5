"""The gain models outside the per-stage catalogue (kbench.analysis.opportunities), each an Opportunity for the one
ranking: a counted stage's busiest unit where there is no FLOP/byte model (``unit_headroom``), an Nsight Compute
rule's estimate weighted by the stage's share (``ncu_rule``), and a timeline's idle time and the overlap a concurrent
plan leaves (``gpu_idle``, ``unused_overlap``). Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbench.analysis.catalogue.evidence import GAIN
from kbench.analysis.counters import StageCounters
from kbench.analysis.ncu import Rule
from kbench.analysis.opportunities import Evidence, Opportunity

if TYPE_CHECKING:  # pandas comes with the timeline types: only the timeline path needs it
    from kbench.analysis.timeline_stages import TimelineAnalysis


def unit_headroom(c: StageCounters, share: float, within_pct: float | None = None) -> Opportunity | None:
    """Raise a counted stage's busiest unit (DRAM or compute) toward its peak, at most ``within_pct`` (its distance to
    the practical roof, where its waterfall measured one: no item promises more); None when no unit was read."""
    busiest = max((v for v in (c.compute_pct, c.dram_pct) if v is not None), default=None)
    if busiest is None:
        return None
    unit, metric = ("DRAM", "dram_pct") if busiest == c.dram_pct else ("compute", "compute_pct")
    headroom = max(0.0, (100.0 - busiest) * share)
    capped = within_pct is not None and within_pct < headroom
    return Opportunity(
        name=f"Raise {unit} throughput of stage {c.stage} toward its peak",
        gain_pct=min(headroom, within_pct) if capped and within_pct is not None else headroom,
        metric=f"{c.stage}.{metric}",
        value=f"{busiest:.1f}%",
        stage=c.stage,
        formula="min(max(0, (100 - busiest_pct) * stage_share), distance_pct)"
        if capped
        else "max(0, (100 - busiest_pct) * stage_share)",
        inputs={"busiest_pct": busiest, "stage_share": share, **({"distance_pct": within_pct} if capped else {})},
    )


# ncu rules that are no change to the kernel, or that the catalogue computes itself from the grid
NOT_ADVICE = {"MemoryL2Compression", "LaunchConfiguration"}


def ncu_rule(e: Evidence, r: Rule) -> Opportunity | None:
    """An ncu rule as evidence: its whole-kernel ("global") estimate converted to the plan's time and capped by
    the stage's practical roof; rules without an estimate, local estimates and rules that are no kernel change
    are left to report-verbose.md."""
    if r.speedup_pct is None or r.speedup_type != "global" or r.rule_id in NOT_ADVICE:
        return None
    metric, value = r.focus[0] if r.focus else ("gpu__time_duration.sum", "n/a")
    shown = f"{value:.4g}" if isinstance(value, float) else str(value).replace(" ", "_") or "n/a"
    return Opportunity(
        name=f"ncu says: {r.title or r.rule_id} in {e.name} (rule {r.rule_id})",
        gain_pct=e.gain(e.us * r.speedup_pct / 100.0),
        metric=metric,
        value=shown,
        change=f"see rule {r.rule_id} for {e.name} in report-verbose.md",
        stage=e.name,
        kernel=e.kernel_name,
        formula=GAIN.format(saved="duration_us * speedup_pct / 100"),
        inputs=e.gain_inputs(duration_us=e.us, speedup_pct=r.speedup_pct),
    )


def gpu_idle(a: TimelineAnalysis) -> Opportunity | None:
    """Close the GPU's idle time inside each iteration; None when it never idled."""
    idle = a.idle_pct
    if idle <= 0:
        return None
    return Opportunity(
        name="Close the GPU's idle time in each iteration (launch gaps and synchronizations)",
        change="fewer launches and host synchronizations per iteration: capture the plan in a CUDA graph, or fuse "
        "short stages",
        gain_pct=idle,
        metric="plan.gpu_idle_pct",
        value=f"{idle:.1f}%",
        formula="idle_pct",
        inputs={"idle_pct": idle},
    )


def unused_overlap(a: TimelineAnalysis) -> Opportunity | None:
    """Overlap a concurrent plan's stages up to the critical path; None for a serial plan or one already there."""
    o = a.overlap
    if o is None or o.together_us <= o.ideal_us:
        return None
    return Opportunity(
        name=f"Overlap the concurrent stages up to the critical path ({o.ideal_us:.1f} us)",
        change="start each stage as soon as the stages it reads from are done: launch the independent stages first "
        "on their streams, or give the long one fewer CTAs so the others find free SMs",
        gain_pct=100.0 * (o.together_us - o.ideal_us) / a.window_us,  # a share of the plan's wall time
        metric="plan.overlap_achieved",
        value="n/a" if o.achieved_pct is None else f"{o.achieved_pct:.1f}%",
        formula="100 * (together_us - ideal_us) / window_us",
        inputs={"together_us": o.together_us, "ideal_us": o.ideal_us, "window_us": a.window_us},
    )
