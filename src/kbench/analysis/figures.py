"""The figures every report's core shows: each stage's figures (``stages``), the plan's class and root cause, and
Top 3 (``opportunities``), assembled for what a mode measured: timings, counters or a timeline. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from kbench.analysis import gains, main_kernel
from kbench.analysis import opportunities as op
from kbench.analysis import stages as st
from kbench.analysis.access_facts import Predicted
from kbench.analysis.bottleneck import TIMELINE_IDLE_PCT, StageClass, plan_class
from kbench.analysis.catalogue import issue
from kbench.analysis.counters import StageCounters, StageModel
from kbench.analysis.devices import ActiveDevice, SmLimits
from kbench.analysis.fusion import fusion
from kbench.analysis.kernels import StageKernels
from kbench.analysis.lines import LineModel
from kbench.analysis.ncu import Rule
from kbench.analysis.occupancy import ctas_per_sm
from kbench.analysis.opportunities import Opportunity
from kbench.analysis.ptx import InstructionMix
from kbench.analysis.roofline import Ceilings
from kbench.analysis.sampling import SampledStage
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.analysis.ttgir import AtomicOp, DotOp, partition_warps
from kbench.analysis.waterfall import Waterfall
from kbench.errors import KbenchError
from kbench.model import Model
from kbench.plan.base import Stage

if TYPE_CHECKING:  # pandas comes with the timeline types: only the timeline path needs it
    from kbench.analysis.timeline_stages import TimelineAnalysis


class PlanFigures(Model):
    stages: list[StageFigures]
    total_us: float
    bottleneck: StageClass
    root_cause: str
    opportunities: list[Opportunity]
    opportunities_note: str | None
    ceilings_source: str
    roofline_known: bool
    practical_source: str | None = None  # the roofs Top 3 measures gains against, where they differ
    # what timed the stages: a GPU (its timers, ncu), or Triton's CPU interpreter (access mode), whose wall time is
    # never GPU time: no rate, speed-up or "fastest" is read from it
    timer: Literal["gpu", "interpreter"] = "gpu"
    kernels: list[StageKernels] = Field(default_factory=list)  # per stage (in stage order): the kernels the GPU ran
    # per stage with a practical roof (in stage order): its distance to the roof, step by step
    waterfalls: list[Waterfall] = Field(default_factory=list)

    def described(self, tiling: dict[str, dict[str, Any]]) -> list[str]:
        """For each stage whose kernels are known, which of them its launch record (``tiling``) describes."""
        said = (sk.describes((tiling.get(sk.stage) or {}).get("kernel")) for sk in self.kernels)
        return [line for line in said if line]


def _plan(
    figs: list[StageFigures],
    verdict: tuple[StageClass, str],
    ranked: tuple[list[Opportunity], str | None],
    ceilings_source: str,
    roofline_known: bool,
    facts: Facts | None = None,
    kernels: dict[str, StageKernels] | None = None,  # default: the facts' (a counters run without a model has none)
    waterfalls: Sequence[Waterfall] = (),
) -> PlanFigures:
    kernels = kernels if kernels is not None else (facts.kernels if facts else {})
    used = sorted({facts.practical[f.precision].source for f in figs if facts and f.precision in facts.practical})
    return PlanFigures(
        practical_source="; ".join(used) or None,
        stages=figs,
        total_us=sum(f.duration_us for f in figs),
        bottleneck=verdict[0],
        root_cause=verdict[1],
        opportunities=ranked[0],
        opportunities_note=ranked[1],
        ceilings_source=ceilings_source,
        roofline_known=roofline_known,
        kernels=[kernels[f.name] for f in figs if f.name in kernels],
        waterfalls=list(waterfalls),
    )


def _deciding(figs: Sequence[StageFigures]) -> tuple[StageClass, StageFigures]:
    """The plan's class (the class holding most of its time) and its longest stage of that class."""
    classified = [f for f in figs if f.bottleneck is not None]
    plan = plan_class((f.duration_us, f.bottleneck) for f in classified if f.bottleneck)
    return plan, max((f for f in classified if f.bottleneck == plan), key=lambda f: f.duration_us)


@dataclass(frozen=True)
class Facts:
    """What the diagnosis knows besides timings or counters: the practical roofs per precision (measured
    ceilings), the SM count, and each stage's launch record (tiling/<stage>.json: grid, registers, spills)."""

    practical: dict[str, Ceilings] = field(default_factory=dict)
    sm_count: int | None = None
    tiling: dict[str, dict[str, Any]] = field(default_factory=dict)
    limits: SmLimits | None = None  # what an SM holds (the occupancy calculator's inputs)
    measured: dict[str, dict[str, Any]] = field(default_factory=dict)  # per stage, Evidence a mode measured itself
    dram_latency_ns: float | None = None  # measured on the device (conf/devices.json)
    dram_peak_gbps: float | None = None  # datasheet (conf/devices.json): what DRAM% is a share of
    atomic_serial_ns: float | None = None
    ieee_division_xu: float | None = None  # XU time of an IEEE fp32 division over one MUFU (conf/devices.json)
    arch: str | None = None
    predicted: dict[str, Predicted] = field(default_factory=dict)  # per stage: an access run's CPU trace
    kernels: dict[str, StageKernels] = field(default_factory=dict)  # per stage: the kernels the GPU ran in it

    @classmethod
    def of(
        cls,
        device: ActiveDevice,
        tiling: dict[str, dict[str, Any]],
        predicted: dict[str, Predicted] | None = None,
        *,
        kernels: dict[str, StageKernels] | None = None,
        lines: dict[str, list[LineModel]] | None = None,
        sampled: dict[str, dict[str, Any]] | None = None,
    ) -> Facts:
        """The facts a mode passes on: the device's, the launch records, an access run's prediction, the kernels the
        GPU ran per stage, per stage the time by source line of its kernels (the first, its longest, is the one
        the evidence reads), and the Evidence fields PM sampling measured per stage (``sampled``)."""
        spec = device.spec
        latency = spec.measured.get("dram_latency_ns") if spec else None
        atomic = spec.measured.get("atomic_same_address_ns") if spec else None
        division = spec.measured.get("ieee_division_xu_ratio") if spec else None
        return cls(
            practical=spec.practical() if spec else {},
            sm_count=spec.sm_count if spec else None,
            tiling=tiling,
            limits=spec.limits if spec else None,
            dram_latency_ns=latency.value if latency else None,
            dram_peak_gbps=spec.dram_gbps if spec else None,
            atomic_serial_ns=atomic.value if atomic else None,
            ieee_division_xu=division.value if division else None,
            arch=spec.arch if spec else None,
            predicted=predicted or {},
            kernels=kernels or {},
            measured=_measured(lines or {}, sampled or {}),
        )

    def on(self, ceilings: dict[str, Ceilings], roofline_known: bool) -> Facts:
        """On a device conf/devices.json does not know, the ceilings measured at run time are the practical roofs;
        without practical roofs (no measured values given), the datasheet ceilings stand in (their source says so)."""
        return self if roofline_known and self.practical else replace(self, practical=ceilings)

    def measured_by(self, measured: dict[str, dict[str, Any]]) -> Facts:
        """These facts with per-stage Evidence fields a mode measured (the intra timeline's idle tail)."""
        return replace(self, measured=measured)

    def evidence(self, f: StageFigures, total_us: float, **counted: Any) -> op.Evidence:
        """The stage's evidence: its launch record, overridden by what counters measured (``counted``)."""
        t = self.tiling.get(f.name, {})
        grid = t.get("grid")
        mix = InstructionMix.model_validate(t["instructions"]) if t.get("instructions") else None
        known: dict[str, Any] = {
            "sm_count": self.sm_count,
            "ctas": math.prod(int(g) for g in grid) if grid else None,
            "registers": t.get("registers"),
            "warps": t.get("num_warps"),
            "num_stages": t.get("num_stages"),
            "spilled": t.get("spills"),
            "shared_bytes": t.get("shared_bytes"),
            "tensor_cores": t.get("tensor_cores"),
            "launches": (t.get("dataflow") or {}).get("kernels"),
            "flow": t.get("dataflow"),
            "instructions": mix,
            "atomics": [AtomicOp.model_validate(a) for a in t["atomics"]] if t.get("atomics") is not None else None,
            "dots": [DotOp.model_validate(d) for d in t["dots"]] if t.get("dots") is not None else None,
            "partition_warps": partition_warps(t.get("partitions")),
            "loop_barriers": tuple(t["loop_barriers"]) if t.get("loop_barriers") is not None else None,
            **main_kernel.serialization(t),
            "language": t.get("language"),
            "tuning": t["tuning"] if isinstance(t.get("tuning"), dict) else None,
            "limits": self.limits,
            "dram_latency_ns": self.dram_latency_ns,
            "dram_peak_gbps": self.dram_peak_gbps,
            "atomic_serial_ns": self.atomic_serial_ns,
            "ieee_division_xu": self.ieee_division_xu,
            "arch": self.arch,
            "practical_by_precision": self.practical,
            "predicted": self.predicted.get(f.name),
            "kernels": self.kernels.get(f.name),
        }
        tile = dict(t.get("config") or {})
        # where the GPU's kernels of the stage are known, every launch and compiled fact is its main kernel's
        main = main_kernel.facts(t, self.kernels[f.name]) if f.name in self.kernels else None
        if main is not None:
            tile = main.pop("tile")
            known.update(main)
        if self.limits and known.get("warps"):
            regs, smem = known.get("registers"), known.get("shared_bytes")
            held = ctas_per_sm(self.limits, int(known["warps"]), _whole(regs), _whole(smem))
            if held:
                known["ctas_per_sm"], known["ctas_limiter"] = held
        known.update({k: v for k, v in {**self.measured.get(f.name, {}), **counted}.items() if v is not None})
        if main is not None:  # the main kernel's launch facts win over a stage aggregate (counters' largest registers)
            known.update({k: main[k] for k in main_kernel.LAUNCH_FIELDS if main[k] is not None})
        return op.Evidence(stage=f, total_us=total_us, practical=self.practical.get(f.precision), tile=tile, **known)


def _measured(lines: dict[str, list[LineModel]], sampled: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per stage, the Evidence fields a mode measured: its first line model, its sampled counters."""
    out: dict[str, dict[str, Any]] = {name: {"lines": models[0]} for name, models in lines.items() if models}
    for name, fields in sampled.items():
        if fields:
            out.setdefault(name, {}).update(fields)
    return out


def _whole(value: Any) -> int | None:
    return None if value is None else int(value)


FEWER = (
    "Only {n} listed: the catalogue found nothing more to name in this run's data (timings, the kernels' launch "
    "facts{counters}), and each stage at its practical roof gets one line."
)


def from_timings(
    stages: Sequence[Stage],
    timings: dict[str, TimingStats],
    ceilings: dict[str, Ceilings],
    *,
    roofline_known: bool,
    device_name: str,
    facts: Facts | None = None,
    sampled: dict[str, tuple[SampledStage, dict[str, str]]] | None = None,
) -> PlanFigures:
    """Timed stages (event mode, and a timeline with a plan). ``ceilings`` maps precision -> roofs (datasheet when
    ``roofline_known``, else measured at run time and used only to classify); Top 3 from the catalogue, against
    the practical roofs (``facts``; on an unknown device the measured ``ceilings`` are the practical roofs).
    ``sampled``: per stage, its PM-sampled counters and how each Stages-table figure was measured (event mode)."""
    facts = (facts or Facts()).on(ceilings, roofline_known)
    figs = [
        st.timed(s, timings[s.name], ceilings.get(s.precision), roofline_known, facts.practical.get(s.precision))
        for s in stages
    ]
    total_us = sum(f.duration_us for f in figs)
    for f in figs:
        if f.name in (sampled or {}):
            counters, by = (sampled or {})[f.name]
            f.tc_pct, f.dram_pct, f.counted_by = counters.value("tc_pct"), counters.value("dram_pct"), by
            issue.place(f, facts.evidence(f, total_us))
    classified = [f for f in figs if f.bottleneck is not None]
    if not classified:
        raise KbenchError(
            f"cannot classify any stage on {device_name}: it has no ceiling for precision(s) "
            f"{', '.join(sorted({s.precision for s in stages}))} (conf/devices.json, or the run-time measurement "
            "for an unknown device)"
        )
    plan, top = _deciding(figs)
    root = st.roofline_root_cause(top, 100.0 * top.duration_us / total_us, ceilings[top.precision], not roofline_known)
    found, falls = diagnosed(figs, facts, total_us)
    ranked = op.rank(found, fewer=lambda n: FEWER.format(n=n, counters=""))
    return _plan(figs, (plan, root), ranked, next(iter(ceilings.values())).source, roofline_known, facts,
                 waterfalls=falls)  # fmt: skip


def diagnosed(
    figs: Sequence[StageFigures], facts: Facts, total_us: float | None = None
) -> tuple[list[Opportunity | None], list[Waterfall]]:
    """The catalogue's findings for every classified timed stage and the fusion the data flow allows, as shares
    of ``total_us`` (default: the stages' times summed), and each such stage's distance waterfall."""
    total = total_us if total_us is not None else sum(f.duration_us for f in figs)
    found: list[Opportunity | None] = []
    falls: list[Waterfall] = []
    for f in figs:
        if f.bottleneck is None:
            continue
        items, fall = op.assess(facts.evidence(f, total))
        found += items
        falls += [fall] if fall is not None else []
    return [*found, fusion(figs, facts.tiling, total, facts.practical)], falls


def from_counters(
    counters: Sequence[StageCounters],
    models: dict[str, StageModel],
    ceilings: dict[str, Ceilings],
    *,
    roofline_known: bool,
    rules: dict[str, list[Rule]] | None = None,
    facts: Facts | None = None,
) -> PlanFigures:
    """Counted stages (annotation and ncu modes). Class from TC%/SM% vs DRAM% (section 4); Top 3 from the
    catalogue over the counters (against the practical roofs in ``facts`` where the plan gives a FLOP/byte
    model; without one, the headroom of the busiest unit when nothing is named), and in ncu mode also ncu's own
    rules (``rules``) as evidence: their estimates converted to the whole plan and capped by the practical roof."""
    facts = facts or Facts()
    total = sum(c.duration_us for c in counters)
    figs: list[StageFigures] = []
    candidates: list[Opportunity | None] = []
    falls: list[Waterfall] = []
    for c in counters:
        model = models.get(c.stage)
        # without a plan, ncu's counts of FLOPs and DRAM bytes against the peak of the precision they show
        f = st.counted(c, model, ceilings.get(model.precision if model else st.counted_precision(c)), roofline_known)
        figs.append(f)
        e = facts.evidence(
            f,
            total,
            sm_count=int(c.sm_count) if c.sm_count else None,
            ctas=c.ctas,
            ctas_per_sm=c.ctas_per_sm,
            ctas_limiter=c.occupancy_limiter,
            launches=len(c.kernels),
            ld_sectors=c.ld_sectors,
            st_sectors=c.st_sectors,
            ld_use=c.ld_use,
            st_use=c.st_use,
            registers=c.registers,
            spill_bytes=c.spill_bytes,
            moved_bytes=c.measured_bytes,
            tensor_cores=None if c.tensor_flops is None else c.tensor_flops > 0,
            tensor_paths=c.tensor_paths or None,
            stalls=c.stalls or None,
            hot_lines=tuple(c.hot_lines) or None,
            pipes=c.pipes or None,
            shared_wavefronts=c.shared_wavefronts,
            shared_conflicts=c.shared_conflicts,
            issued=c.inst_issued,
            issued_counter=c.inst_counter,
            sm_cycles=c.sm_cycles,
            theoretical_occupancy_pct=c.theoretical_occupancy_pct,
            sm_busy_pct=c.sm_busy_pct,
        )
        issue.place(f, e)
        # without a plan the work counted (FLOPs, DRAM bytes) stands in for the model, against the practical roof of
        # the precision the counters show; without either, the busiest unit's headroom is the distance
        found, fall = op.assess(e if f.flops is not None and f.dram_bytes is not None else replace(e, practical=None))
        falls += [fall] if fall is not None else []
        share = c.duration_us / total if total else 0.0
        candidates += found or [gains.unit_headroom(c, share, fall.gap_points if fall is not None else None)]
        if not any(o.named for o in found):
            # ncu's rules lead only where the catalogue named no mechanism (their estimates are whole-kernel
            # what-ifs; where kbench measured the mechanism, they stay evidence in report-verbose.md)
            candidates += [gains.ncu_rule(e, r) for r in (rules or {}).get(c.stage, [])]
    if not any(f.bottleneck is not None for f in figs):
        raise KbenchError("the ncu report holds no throughput counters to classify any stage with")
    if models:
        candidates.append(fusion(figs, facts.tiling, total, facts.practical))
    plan, top = _deciding(figs)
    top_counters = next(c for c in counters if c.stage == top.name)
    root = st.counter_root_cause(top_counters, top.bottleneck, 100.0 * top.duration_us / total if total else 100.0)
    ranked = op.rank(
        candidates,
        fewer=lambda n: FEWER.format(n=n, counters=", ncu's counters" + (" and rules" if rules is not None else "")),
        none=(
            Opportunity(name="No estimate available", gain_pct=0.0, metric="rules_with_speedup", value="0"),
            "No gain can be estimated: no mechanism of the catalogue and no ncu rule with an estimate applies.",
        ),
    )
    placed = [f for f in figs if f.bound_us is not None]
    known = roofline_known and bool(placed)
    if not known:
        source = "n/a (no FLOPs or bytes counted)" if roofline_known else "n/a (no device peaks in conf/devices.json)"
    elif models:
        source = "datasheet peaks"
    else:  # the device the report names, from conf/devices.json; the work from ncu's counts
        used = "; ".join(sorted({ceilings[f.precision].source for f in placed if f.precision in ceilings}))
        source = f"{used}, against ncu's counts of FLOPs and DRAM bytes (no FLOP/byte model: --plan gives one)"
    return _plan(figs, (plan, root), ranked, source, known, facts if models else None, kernels=facts.kernels,
                 waterfalls=falls)  # fmt: skip


class Undecided(KbenchError):
    """A timeline that settles no class the report contract allows: the GPU was busy (not latency-bound by idle
    time) and, with no FLOP/byte model and no counters, memory- and compute-bound cannot be told apart."""


def from_timeline(
    a: TimelineAnalysis,
    stages: Sequence[Stage] | None,
    ceilings: dict[str, Ceilings],
    *,
    roofline_known: bool,
    device_name: str,
    facts: Facts | None = None,
) -> PlanFigures:
    """A timeline's stages: each stage's median GPU span on the roofline (with the plan's FLOP/byte model), its
    timeline facts in the key issue, and Top 3 from the catalogue, the GPU's idle time and the overlap left
    unused, all as shares of the plan's wall time (the median iteration window). Latency-bound when the GPU idles
    TIMELINE_IDLE_PCT of each iteration."""
    idle = a.idle_pct
    if stages is not None:
        facts = (facts or Facts()).on(ceilings, roofline_known)
        timed = from_timings(
            stages,
            {s.stage: s.gpu for s in a.stages},
            ceilings,
            roofline_known=roofline_known,
            device_name=device_name,
            facts=facts,
        )
        # every timeline gain is a share of the plan's wall time: the median iteration window
        figs, (gaps, falls) = timed.stages, diagnosed(timed.stages, facts, a.window_us)
        verdict, source, known = (timed.bottleneck, timed.root_cause), timed.ceilings_source, roofline_known
    elif idle < TIMELINE_IDLE_PCT:
        raise Undecided(
            f"the GPU was busy {100 - idle:.1f}% of the analysed window, and a timeline alone cannot tell "
            "memory- from compute-bound"
        )
    else:
        figs, gaps, falls = [st.untimed_model(s) for s in a.stages], [], []
        verdict, source, known = ("Latency", st.idle_root_cause(a)), "n/a (no FLOP/byte model)", False
    for f in figs:
        st.with_timeline_facts(f, a.stage(f.name))
    if idle >= TIMELINE_IDLE_PCT:
        verdict = ("Latency", st.idle_root_cause(a))
    ranked = op.rank(
        [*gaps, gains.gpu_idle(a), gains.unused_overlap(a)],
        fewer=lambda n: (
            f"Only {n} listed: nsys mode names the catalogue's mechanisms from the stages' times and launch facts, "
            "the GPU's idle time and the overlap a concurrent plan leaves unused (all as shares of the iteration's "
            "wall time), and this capture offers no more."
        ),
        none=(
            Opportunity(name="No estimate available", gain_pct=0.0, metric="plan.gpu_idle_pct", value="0.0%"),
            "No gain can be estimated: the GPU never idled and no stage has a roofline model.",
        ),
    )
    return _plan(figs, verdict, ranked, source, known, facts, waterfalls=falls)
