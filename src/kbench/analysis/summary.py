"""From per-stage timings and the device's ceilings to the figures a report shows. Pure.

Event mode has no hardware counters, so a stage's class comes from its roofline position: achieved FLOP/s
over the compute ceiling and achieved bytes/s over the DRAM ceiling, classified by ``bottleneck.classify``.
Opportunities are ranked by each stage's distance to its roofline bound (the share of plan time it would
save on the roof), which is the only gain model this mode has.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from kbench.analysis import roofline as rl
from kbench.analysis.bottleneck import StageClass, classify, plan_class
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import KbenchError
from kbench.plan.base import Stage


class StageFigures(BaseModel):
    name: str
    precision: str
    flops: float | None  # None: no analytic model and nothing measured
    dram_bytes: float | None
    timing: TimingStats
    duration_us: float
    tflops: float | None
    gbps: float | None
    intensity: float | None
    ridge: float | None = None
    roof_tflops: float | None = None
    bound_us: float | None = None
    efficiency_pct: float | None = None
    limiting_roof: str | None = None
    compute_pct: float | None = None
    memory_pct: float | None = None
    # hardware counters: None (rendered n/a) in modes that do not read them
    tc_pct: float | None = None
    dram_pct: float | None = None
    occ_pct: float | None = None
    bottleneck: StageClass | None = None
    key_issue: str = ""


class Opportunity(BaseModel):
    name: str
    gain_pct: float
    metric: str
    value: str


class PlanFigures(BaseModel):
    stages: list[StageFigures]
    total_us: float
    bottleneck: StageClass
    root_cause: str
    opportunities: list[Opportunity]
    opportunities_note: str | None
    ceilings_source: str
    roofline_known: bool


def _stage(s: Stage, t: TimingStats, c: rl.Ceilings | None, roofline_known: bool) -> StageFigures:
    us = t.median_us
    tflops, gbps = rl.achieved_tflops(s.flops, us), rl.achieved_gbps(s.dram_bytes, us)
    f = StageFigures(
        name=s.name,
        precision=s.precision,
        flops=s.flops,
        dram_bytes=s.dram_bytes,
        timing=t,
        duration_us=us,
        tflops=tflops,
        gbps=gbps,
        intensity=rl.intensity(s.flops, s.dram_bytes),
    )
    if c is None:
        f.key_issue = f"no {s.precision} ceiling for this device: not classified"
        return f
    f.compute_pct = 100.0 * tflops / c.tflops
    f.memory_pct = 100.0 * gbps / c.gbps
    f.bottleneck = classify(f.compute_pct, f.memory_pct)
    if roofline_known:
        f.ridge = c.ridge
        f.roof_tflops = rl.roof_tflops(c, s.flops, s.dram_bytes)
        f.bound_us = rl.bound_us(c, s.flops, s.dram_bytes)
        f.efficiency_pct = 100.0 * rl.efficiency(c, s.flops, s.dram_bytes, us)
        f.limiting_roof = rl.limiting_roof(c, s.flops, s.dram_bytes)
        if f.efficiency_pct > 100.0:
            issue = (
                f"beats its roofline bound ({f.efficiency_pct:.1f}%): inputs still in L2 from an earlier stage, "
                "or the FLOP/byte model or the timing is wrong"
            )
        elif f.bottleneck == "Latency":
            issue = f"neither unit busy: {f.compute_pct:.1f}% of {s.precision} peak, {f.memory_pct:.1f}% of DRAM peak"
        elif f.limiting_roof == "memory":
            issue = f"{f.efficiency_pct:.1f}% of memory roof ({f.gbps:.0f} of {c.gbps:.0f} GB/s)"
        else:
            issue = f"{f.efficiency_pct:.1f}% of {s.precision} roof ({f.tflops:.1f} of {c.tflops:.1f} TFLOP/s)"
    else:
        issue = (
            f"device not in devices.json: {f.compute_pct:.1f}% of measured {s.precision} ceiling, "
            f"{f.memory_pct:.1f}% of measured copy bandwidth"
        )
    if t.unstable:
        issue += f"; timing unstable (spread {t.spread_pct:.1f}%)"
    f.key_issue = issue
    return f


def root_cause(s: StageFigures, share: float, c: rl.Ceilings, measured: bool) -> str:
    where = f"Stage {s.name} takes {share:.0f}% of the plan's time"
    kind = "measured" if measured else "datasheet"
    if s.bottleneck == "Memory":
        return (
            f"{where} and moves {s.gbps:.0f} GB/s, {s.memory_pct:.1f}% of the {c.gbps:.0f} GB/s {kind} DRAM "
            "ceiling, so memory bandwidth sets its time."
        )
    if s.bottleneck == "Compute":
        return (
            f"{where} at {s.tflops:.1f} TFLOP/s, {s.compute_pct:.1f}% of the {c.tflops:.1f} TFLOP/s {kind} "
            f"{s.precision} ceiling, so arithmetic throughput sets its time."
        )
    return (
        f"{where} but reaches only {s.compute_pct:.1f}% of the {kind} {s.precision} ceiling and "
        f"{s.memory_pct:.1f}% of DRAM bandwidth, so neither unit is saturated. Launch overhead, occupancy or "
        "dependency stalls dominate; a counter-based mode can tell which."
    )


def summarize(
    stages: Sequence[Stage],
    timings: dict[str, TimingStats],
    ceilings: dict[str, rl.Ceilings],
    *,
    roofline_known: bool,
    device_name: str,
) -> PlanFigures:
    """Figures for every stage and the plan. ``ceilings`` maps precision -> roofs (datasheet when
    ``roofline_known``, else measured at run time and used only to classify)."""
    figs = [_stage(s, timings[s.name], ceilings.get(s.precision), roofline_known) for s in stages]
    classified = [f for f in figs if f.bottleneck is not None]
    if not classified:
        raise KbenchError(
            f"cannot classify any stage on {device_name}: it has no ceiling for precision(s) "
            f"{', '.join(sorted({s.precision for s in stages}))} (conf/devices.json, or the run-time measurement "
            "for an unknown device)"
        )
    total = sum(f.duration_us for f in figs)
    plan = plan_class((f.duration_us, f.bottleneck) for f in classified if f.bottleneck)
    top = max((f for f in classified if f.bottleneck == plan), key=lambda f: f.duration_us)
    root = root_cause(top, 100.0 * top.duration_us / total, ceilings[top.precision], not roofline_known)
    source = next(iter(ceilings.values())).source

    # Gain model: the share of plan time a stage would save on its roof (datasheet roofline, or for an
    # unknown device the measured ceilings; its roofline columns stay n/a either way).
    kind = "roofline" if roofline_known else "measured_roof"
    opps: list[Opportunity] = []
    for f in classified:
        c = ceilings[f.precision]
        assert f.flops is not None and f.dram_bytes is not None  # event mode always has the analytic model
        bound = rl.bound_us(c, f.flops, f.dram_bytes)
        eff = 100.0 * bound / f.duration_us
        opps.append(
            Opportunity(
                name=f"Bring stage {f.name} to its {'' if roofline_known else 'measured '}"
                f"{rl.limiting_roof(c, f.flops, f.dram_bytes)} roof",
                gain_pct=max(0.0, 100.0 * (f.duration_us - bound) / total),
                metric=f"{f.name}.{kind}_efficiency",
                value=f"{eff:.1f}%",
            )
        )
    opps.sort(key=lambda o: o.gain_pct, reverse=True)
    opps = opps[:3]
    note = None
    if len(opps) < 3:
        note = (
            f"Only {len(opps)} listed: event mode estimates gains from each stage's distance to its "
            f"{'roofline' if roofline_known else 'measured ceilings'}, and this plan has {len(classified)} "
            "classified stage(s); the counter-based modes rank more."
        )
    return PlanFigures(
        stages=figs,
        total_us=total,
        bottleneck=plan,
        root_cause=root,
        opportunities=opps,
        opportunities_note=note,
        ceilings_source=source,
        roofline_known=roofline_known,
    )
