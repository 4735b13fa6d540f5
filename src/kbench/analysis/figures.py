"""The figures every report's core shows: each stage's figures (``stages``), the plan's class and root cause, and
Top 3 (``opportunities``), assembled for what a mode measured: timings, counters or a timeline. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from kbench.analysis import opportunities as op
from kbench.analysis import stages as st
from kbench.analysis.bottleneck import TIMELINE_IDLE_PCT, StageClass, plan_class
from kbench.analysis.counters import StageCounters, StageModel
from kbench.analysis.ncu import Rule
from kbench.analysis.opportunities import Opportunity
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures
from kbench.analysis.timeline_stages import TimelineAnalysis
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import KbenchError
from kbench.plan.base import Stage


class PlanFigures(BaseModel):
    stages: list[StageFigures]
    total_us: float
    bottleneck: StageClass
    root_cause: str
    opportunities: list[Opportunity]
    opportunities_note: str | None
    ceilings_source: str
    roofline_known: bool


def _plan(
    figs: list[StageFigures],
    verdict: tuple[StageClass, str],
    ranked: tuple[list[Opportunity], str | None],
    ceilings_source: str,
    roofline_known: bool,
) -> PlanFigures:
    return PlanFigures(
        stages=figs,
        total_us=sum(f.duration_us for f in figs),
        bottleneck=verdict[0],
        root_cause=verdict[1],
        opportunities=ranked[0],
        opportunities_note=ranked[1],
        ceilings_source=ceilings_source,
        roofline_known=roofline_known,
    )


def _deciding(figs: Sequence[StageFigures]) -> tuple[StageClass, StageFigures]:
    """The plan's class (the class holding most of its time) and its longest stage of that class."""
    classified = [f for f in figs if f.bottleneck is not None]
    plan = plan_class((f.duration_us, f.bottleneck) for f in classified if f.bottleneck)
    return plan, max((f for f in classified if f.bottleneck == plan), key=lambda f: f.duration_us)


def from_timings(
    stages: Sequence[Stage],
    timings: dict[str, TimingStats],
    ceilings: dict[str, Ceilings],
    *,
    roofline_known: bool,
    device_name: str,
) -> PlanFigures:
    """Timed stages (event mode, and a timeline with a plan). ``ceilings`` maps precision -> roofs (datasheet when
    ``roofline_known``, else measured at run time and used only to classify)."""
    figs = [st.timed(s, timings[s.name], ceilings.get(s.precision), roofline_known) for s in stages]
    classified = [f for f in figs if f.bottleneck is not None]
    if not classified:
        raise KbenchError(
            f"cannot classify any stage on {device_name}: it has no ceiling for precision(s) "
            f"{', '.join(sorted({s.precision for s in stages}))} (conf/devices.json, or the run-time measurement "
            "for an unknown device)"
        )
    total = sum(f.duration_us for f in figs)
    plan, top = _deciding(figs)
    root = st.roofline_root_cause(top, 100.0 * top.duration_us / total, ceilings[top.precision], not roofline_known)
    ranked = op.rank(
        roof_gaps(figs, ceilings, roofline_known),
        fewer=lambda n: (
            f"Only {n} listed: event mode estimates gains from each stage's distance to its "
            f"{'roofline' if roofline_known else 'measured ceilings'}, and this plan has {len(classified)} "
            "classified stage(s); the counter-based modes rank more."
        ),
    )
    return _plan(figs, (plan, root), ranked, next(iter(ceilings.values())).source, roofline_known)


def roof_gaps(figs: Sequence[StageFigures], ceilings: dict[str, Ceilings], roofline_known: bool) -> list[Opportunity]:
    """Each classified timed stage's distance to its roof, as a share of the plan's time."""
    total = sum(f.duration_us for f in figs)
    return [op.roof_gap(f, ceilings[f.precision], total, not roofline_known) for f in figs if f.bottleneck is not None]


def from_counters(
    counters: Sequence[StageCounters],
    models: dict[str, StageModel],
    ceilings: dict[str, Ceilings],
    *,
    roofline_known: bool,
    rules: dict[str, list[Rule]] | None = None,
) -> PlanFigures:
    """Counted stages (annotation and ncu modes). Class from TC%/SM% vs DRAM% (section 4); Top 3 from ncu's rules
    when given (their estimated speedup times the stage's share of the plan), else from each stage's distance to
    its roofline (analytic model + datasheet peaks) or, without one, to the speed of light of its busiest unit."""
    total = sum(c.duration_us for c in counters)
    figs: list[StageFigures] = []
    candidates: list[Opportunity | None] = []
    for c in counters:
        model = models.get(c.stage)
        f = st.counted(c, model, ceilings.get(model.precision) if model else None, roofline_known)
        figs.append(f)
        share = c.duration_us / total if total else 0.0
        if rules is not None:
            candidates += [op.ncu_rule(c.stage, r, share) for r in rules.get(c.stage, [])]
        elif f.bound_us is not None and model is not None:
            candidates.append(op.roof_gap(f, ceilings[model.precision], total, measured=False))
        else:
            candidates.append(op.unit_headroom(c, share))
    if not any(f.bottleneck is not None for f in figs):
        raise KbenchError("the ncu report holds no throughput counters to classify any stage with")
    plan, top = _deciding(figs)
    top_counters = next(c for c in counters if c.stage == top.name)
    root = st.counter_root_cause(top_counters, top.bottleneck, 100.0 * top.duration_us / total if total else 100.0)
    source = "ncu rules with a speedup estimate" if rules is not None else "stages to estimate from"
    ranked = op.rank(
        candidates,
        fewer=lambda n: f"Only {n} listed: there are no more {source} in this profile.",
        none=(
            Opportunity(name="No estimate available", gain_pct=0.0, metric="rules_with_speedup", value="0"),
            "No gain can be estimated: ncu attached no speedup estimate to any rule of these kernels.",
        ),
    )
    known = roofline_known and bool(models)
    return _plan(
        figs, (plan, root), ranked, "datasheet peaks" if known else "n/a (no FLOP/byte model or device peaks)", known
    )


def from_timeline(
    a: TimelineAnalysis,
    stages: Sequence[Stage] | None,
    ceilings: dict[str, Ceilings],
    *,
    roofline_known: bool,
    device_name: str,
) -> PlanFigures:
    """A timeline's stages: each stage's median GPU span on the roofline (with the plan's FLOP/byte model), its
    timeline facts in the key issue, and Top 3 from the roofline distance, the GPU's idle time and the overlap
    left unused. Latency-bound when the GPU idles TIMELINE_IDLE_PCT of each iteration."""
    idle = a.idle_pct
    if stages is not None:
        timed = from_timings(
            stages, {s.stage: s.gpu for s in a.stages}, ceilings, roofline_known=roofline_known, device_name=device_name
        )
        figs, gaps = timed.stages, roof_gaps(timed.stages, ceilings, roofline_known)
        verdict, source, known = (timed.bottleneck, timed.root_cause), timed.ceilings_source, roofline_known
    elif idle < TIMELINE_IDLE_PCT:
        raise KbenchError(
            f"the GPU was busy {100 - idle:.1f}% of the analysed window, and a timeline alone cannot tell "
            "memory- from compute-bound: pass --plan <kernel_package> [<version>] --<param>=<value> for its "
            "FLOP/byte model, or profile with --prof_type=annotation for counters"
        )
    else:
        figs, gaps = [st.untimed_model(s) for s in a.stages], []
        verdict, source, known = ("Latency", st.idle_root_cause(a)), "n/a (no FLOP/byte model)", False
    for f in figs:
        st.with_timeline_facts(f, a.stage(f.name))
    if idle >= TIMELINE_IDLE_PCT:
        verdict = ("Latency", st.idle_root_cause(a))
    ranked = op.rank(
        [*gaps, op.gpu_idle(a), op.unused_overlap(a)],
        fewer=lambda n: (
            f"Only {n} listed: nsys mode estimates gains from each stage's distance to its roofline, the "
            "GPU's idle time and the overlap a concurrent plan leaves unused, and this capture offers no more."
        ),
        none=(
            Opportunity(name="No estimate available", gain_pct=0.0, metric="plan.gpu_idle_pct", value="0.0%"),
            "No gain can be estimated: the GPU never idled and no stage has a roofline model.",
        ),
    )
    return _plan(figs, verdict, ranked, source, known)
