"""Per-stage hardware counters from profiled kernels, and the health checks of report-contract section 3. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from kbench.analysis import bottleneck as b
from kbench.analysis import roofline as rl
from kbench.analysis.bottleneck import plan_class
from kbench.analysis.ncu import Kernel, Rule
from kbench.analysis.roofline import Ceilings
from kbench.analysis.summary import Opportunity, PlanFigures, StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import KbenchError


class StageCounters(BaseModel):
    """A stage's kernels combined: times and bytes summed, rates weighted by each kernel's duration."""

    stage: str
    kernels: list[str]
    grids: list[str]
    duration_us: float
    tc_pct: float | None
    sm_pct: float | None
    dram_pct: float | None
    occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    l2_hit_pct: float | None
    spill_bytes: float | None
    waves: float | None
    registers: float | None
    shared_bytes: float | None
    measured_flops: float | None
    tensor_flops: float | None
    measured_bytes: float | None
    replay_passes: float | None

    @property
    def compute_pct(self) -> float | None:
        """Tensor pipe, or SM throughput for arithmetic outside the tensor cores (contract section 4)."""
        vals = [v for v in (self.tc_pct, self.sm_pct) if v is not None]
        return max(vals) if vals else None

    def bottleneck(self) -> b.StageClass | None:
        if self.compute_pct is None or self.dram_pct is None:
            return None
        return b.classify(self.compute_pct, self.dram_pct)

    def issues(self) -> list[str]:
        """Section 3's unhealthy metrics, most severe first, each as 'what (metric=value)'."""
        out = []
        if self.spill_bytes:
            out.append(f"register spilling ({self.spill_bytes:.0f} local bytes)")
        if self.occupancy_pct is not None and self.occupancy_pct < b.HEALTHY_OCCUPANCY_PCT:
            out.append(f"low occupancy ({self.occupancy_pct:.1f}% < {b.HEALTHY_OCCUPANCY_PCT:.0f}%)")
        if self.waves is not None and self.waves < b.HEALTHY_WAVES:
            out.append(f"underfilled GPU ({self.waves:.2f} waves)")
        if b.locality_issue(self.l2_hit_pct):
            out.append(f"L2 hit {self.l2_hit_pct:.1f}% < {b.HEALTHY_L2_HIT_PCT:.0f}%")
        return out


def _weighted(ks: Sequence[Kernel], key: str) -> float | None:
    pairs = [(k.m(key), k.duration_us) for k in ks]
    if any(v is None or d is None for v, d in pairs) or not pairs:
        return None
    total = sum(d for _, d in pairs if d is not None)
    return sum(v * d for v, d in pairs if v is not None and d is not None) / total if total else None


def _sum(values: Sequence[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)


def _extreme(values: Sequence[float | None], largest: bool) -> float | None:
    present = [v for v in values if v is not None]
    return (max(present) if largest else min(present)) if present else None


def combine(stage: str, ks: Sequence[Kernel]) -> StageCounters:
    if not ks:
        raise ValueError(f"stage {stage} has no kernels")
    return StageCounters(
        stage=stage,
        kernels=[k.name for k in ks],
        grids=[f"{k.grid}x{k.block}" if k.grid and k.block else "n/a" for k in ks],
        duration_us=_sum([k.duration_us for k in ks]) or 0.0,
        tc_pct=_weighted(ks, "tc_pct"),
        sm_pct=_weighted(ks, "sm_pct"),
        dram_pct=_weighted(ks, "dram_pct"),
        occupancy_pct=_weighted(ks, "occupancy_pct"),
        theoretical_occupancy_pct=_extreme([k.m("theoretical_occupancy_pct") for k in ks], largest=False),
        l2_hit_pct=_weighted(ks, "l2_hit_pct"),
        spill_bytes=_sum([k.spill_bytes for k in ks]),
        waves=_extreme([k.m("waves") for k in ks], largest=False),
        registers=_extreme([k.m("registers") for k in ks], largest=True),
        shared_bytes=_extreme([k.m("shared_bytes") for k in ks], largest=True),
        measured_flops=_sum([k.measured_flops for k in ks]),
        tensor_flops=_sum([k.tensor_flops for k in ks]),
        measured_bytes=_sum([k.measured_bytes for k in ks]),
        replay_passes=_extreme([k.m("replay_passes") for k in ks], largest=True),
    )


class StageModel(BaseModel):
    """A stage's analytic model, when a plan is known: FLOPs, DRAM bytes, precision."""

    flops: float
    dram_bytes: float
    precision: str


def _opportunity_from_rule(stage: str, r: Rule, share: float) -> Opportunity | None:
    if r.speedup_pct is None:
        return None
    metric, value = r.focus[0] if r.focus else ("gpu__time_duration.sum", "n/a")
    shown = f"{value:.4g}" if isinstance(value, float) else str(value).replace(" ", "_") or "n/a"
    title = r.title or r.rule_id
    return Opportunity(
        name=f"{title} in {stage} (ncu {r.rule_id}, {r.speedup_type} speedup)",
        gain_pct=r.speedup_pct * share,
        metric=metric,
        value=shown,
    )


def summarize_counters(
    counters: Sequence[StageCounters],
    models: dict[str, StageModel],
    ceilings: dict[str, Ceilings],
    *,
    roofline_known: bool,
    rules: dict[str, list[Rule]] | None = None,
) -> PlanFigures:
    """Figures from ncu counters. Class from TC%/SM% vs DRAM% (section 4); Top 3 from ncu's rules when given
    (their estimated speedup times the stage's share of the plan), else from each stage's distance to its
    roofline (analytic model + datasheet peaks) or, without one, to the speed of light of its busiest unit."""
    total = sum(c.duration_us for c in counters)
    figs: list[StageFigures] = []
    opps: list[Opportunity] = []
    for c in counters:
        model = models.get(c.stage)
        flops = model.flops if model else c.measured_flops
        nbytes = model.dram_bytes if model else c.measured_bytes
        us = c.duration_us
        f = StageFigures(
            name=c.stage,
            precision=model.precision if model else "n/a",
            flops=flops,
            dram_bytes=nbytes,
            timing=TimingStats.of([us]),
            duration_us=us,
            tflops=None if flops is None else rl.achieved_tflops(flops, us),
            gbps=None if nbytes is None else rl.achieved_gbps(nbytes, us),
            intensity=None if flops is None or nbytes is None else rl.intensity(flops, nbytes),
            tc_pct=c.tc_pct,
            dram_pct=c.dram_pct,
            occ_pct=c.occupancy_pct,
            bottleneck=c.bottleneck(),
            compute_pct=c.compute_pct,
            memory_pct=c.dram_pct,
        )
        ceiling = ceilings.get(model.precision) if model else None
        if ceiling is not None and roofline_known and model is not None and flops is not None and nbytes is not None:
            f.ridge = ceiling.ridge
            f.roof_tflops = rl.roof_tflops(ceiling, flops, nbytes)
            f.bound_us = rl.bound_us(ceiling, flops, nbytes)
            f.efficiency_pct = 100.0 * f.bound_us / us
            f.limiting_roof = rl.limiting_roof(ceiling, flops, nbytes)
        share = us / total if total else 0.0
        busiest = max((v for v in (c.compute_pct, c.dram_pct) if v is not None), default=None)
        facts = [
            f"TC {c.tc_pct:.1f}%" if c.tc_pct is not None else None,
            f"DRAM {c.dram_pct:.1f}%" if c.dram_pct is not None else None,
        ]
        mismatch = model_mismatch(model, c)
        issue = "; ".join([*mismatch, *c.issues(), ", ".join(x for x in facts if x)]) or "no counter read"
        if f.efficiency_pct is not None and f.efficiency_pct > 100.0:
            issue = f"beats its roofline bound ({f.efficiency_pct:.1f}%): FLOP/byte model or timing is wrong; " + issue
        f.key_issue = issue
        figs.append(f)
        if rules is None:
            if f.bound_us is not None and f.efficiency_pct is not None:
                opps.append(
                    Opportunity(
                        name=f"Bring stage {c.stage} to its {f.limiting_roof} roof",
                        gain_pct=max(0.0, 100.0 * (us - f.bound_us) / total),
                        metric=f"{c.stage}.roofline_efficiency",
                        value=f"{f.efficiency_pct:.1f}%",
                    )
                )
            elif busiest is not None:
                unit, metric = ("DRAM", "dram_pct") if busiest == c.dram_pct else ("compute", "compute_pct")
                opps.append(
                    Opportunity(
                        name=f"Raise {unit} throughput of stage {c.stage} toward its peak",
                        gain_pct=max(0.0, (100.0 - busiest) * share),
                        metric=f"{c.stage}.{metric}",
                        value=f"{busiest:.1f}%",
                    )
                )
        else:
            opps += [o for r in rules.get(c.stage, []) if (o := _opportunity_from_rule(c.stage, r, share))]
    classified = [f for f in figs if f.bottleneck is not None]
    if not classified:
        raise KbenchError("the ncu report holds no throughput counters to classify any stage with")
    plan = plan_class((f.duration_us, f.bottleneck) for f in classified if f.bottleneck)
    top = max((f for f in classified if f.bottleneck == plan), key=lambda f: f.duration_us)
    top_counters = next(c for c in counters if c.stage == top.name)
    root = _counter_root_cause(top_counters, top.bottleneck, 100.0 * top.duration_us / total if total else 100.0)
    opps.sort(key=lambda o: o.gain_pct, reverse=True)
    opps = opps[:3]
    note = None
    if not opps:
        opps = [Opportunity(name="No estimate available", gain_pct=0.0, metric="rules_with_speedup", value="0")]
        note = "No gain can be estimated: ncu attached no speedup estimate to any rule of these kernels."
    elif len(opps) < 3:
        source = "ncu rules with a speedup estimate" if rules is not None else "stages to estimate from"
        note = f"Only {len(opps)} listed: there are no more {source} in this profile."
    source = "datasheet peaks" if roofline_known and models else "n/a (no FLOP/byte model or device peaks)"
    return PlanFigures(
        stages=figs,
        total_us=total,
        bottleneck=plan,
        root_cause=root,
        opportunities=opps,
        opportunities_note=note,
        ceilings_source=source,
        roofline_known=roofline_known and bool(models),
    )


# Measured over analytic beyond this factor (either way) is a finding: the model or the kernel is wrong.
MODEL_MISMATCH = 1.25


def model_mismatch(model: StageModel | None, c: StageCounters) -> list[str]:
    """'measured DRAM bytes 1.98x the model' for each of FLOPs and bytes that disagree beyond MODEL_MISMATCH."""
    if model is None:
        return []
    out = []
    for what, measured, analytic in (
        ("FLOPs", c.measured_flops, model.flops),
        ("DRAM bytes", c.measured_bytes, model.dram_bytes),
    ):
        if measured is None or not analytic:
            continue
        ratio = measured / analytic
        if ratio > MODEL_MISMATCH or ratio < 1 / MODEL_MISMATCH:
            out.append(f"measured {what} {ratio:.2f}x the model")
    return out


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def _counter_root_cause(c: StageCounters, cls: b.StageClass | None, share: float) -> str:
    where = (
        f"Stage {c.stage} takes {share:.0f}% of the profiled time with the tensor pipe at {_pct(c.tc_pct)}, "
        f"SM throughput at {_pct(c.sm_pct)} and DRAM at {_pct(c.dram_pct)} of peak"
    )
    if cls == "Memory":
        return f"{where}, so DRAM bandwidth sets its time."
    if cls == "Compute":
        return f"{where}, so the compute units set its time."
    return f"{where}, so no unit is saturated. Latency (occupancy, dependencies, launch size) sets its time."
