"""Per-stage figures, built here for every mode: a stage's time, its place on the roofline (the plan's analytic
FLOP/byte model against the device's ceilings), its class, the key issue a report shows, and the root-cause
sentence of the stage that decides the plan's class. Pure.

A stage is timed (event mode's CUDA events, a timeline's GPU span) or counted (ncu's counters). A timed stage is
classified from its roofline position: achieved FLOP/s over the compute ceiling and bytes/s over the DRAM
ceiling; a counted one from its TC%/SM% and DRAM% counters (report contract, section 4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from kbench.analysis import bottleneck as b
from kbench.analysis import roofline as rl
from kbench.analysis.counters import StageCounters, StageModel, model_mismatch
from kbench.analysis.timing_stats import TimingStats
from kbench.model import Model
from kbench.plan.base import Stage

if TYPE_CHECKING:  # pandas comes with the timeline types: only the timeline path needs it
    from kbench.analysis.timeline_stages import StageTimeline, TimelineAnalysis


class StageFigures(Model):
    name: str
    precision: str
    flops: float | None  # None: no analytic model and nothing measured
    dram_bytes: float | None
    model: str | None = None  # where flops/dram_bytes come from: "plan" (its analytic model) or "counters" (ncu)
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
    # figure -> what measured it where not ncu (PM sampling): report.json's `by` of tc_pct, dram_pct; not serialized
    counted_by: dict[str, str] = Field(default_factory=dict, exclude=True)
    bottleneck: b.StageClass | None = None
    key_issue: str = ""
    # the issue roof (counter modes; kbench.analysis.catalogue.issue): % of it the issued warp instructions fill, their
    # count, and the modelled FLOPs per issued thread instruction
    issue_roof_pct: float | None = None
    issued: float | None = None
    flops_per_issue: float | None = None
    # access mode (no GPU): the time its trace predicts on the device's practical roofs (kbench.analysis.
    # access_figures.predicted_us), what its runs compare and sweep by instead of the interpreter's time
    predicted_us: float | None = None


def _place(f: StageFigures, c: rl.Ceilings, flops: float, nbytes: float) -> None:
    """The roofline columns of a stage with an analytic model, against datasheet ceilings."""
    f.ridge = c.ridge
    f.roof_tflops = rl.roof_tflops(c, flops, nbytes)
    f.bound_us = rl.bound_us(c, flops, nbytes)
    f.efficiency_pct = 100.0 * rl.efficiency(c, flops, nbytes, f.duration_us)
    f.limiting_roof = rl.limiting_roof(c, flops, nbytes)


def _practical_words(f: StageFigures, s: Stage, c: rl.Ceilings, practical: rl.Ceilings | None) -> str:
    """Where a stage stands against its practical roof (the measured ceiling Top 3 measures gains against), with
    the datasheet peak beside it; against the datasheet alone where no practical roof is known."""
    assert f.efficiency_pct is not None
    memory = f.limiting_roof == "memory"
    if practical is None or (practical.tflops, practical.gbps) == (c.tflops, c.gbps):  # no measured roof
        if memory:
            return f"{f.efficiency_pct:.1f}% of memory roof ({f.gbps:.0f} of {c.gbps:.0f} GB/s)"
        return f"{f.efficiency_pct:.1f}% of {s.precision} roof ({f.tflops:.1f} of {c.tflops:.1f} TFLOP/s)"
    pct = 100.0 * rl.efficiency(practical, s.flops, s.dram_bytes, f.duration_us)
    if memory:
        return (
            f"{pct:.1f}% of its practical memory roof ({f.gbps:.0f} of {practical.gbps:g} GB/s measured; "
            f"{f.efficiency_pct:.1f}% of the {c.gbps:g} GB/s datasheet)"
        )
    return (
        f"{pct:.1f}% of its practical {s.precision} roof ({f.tflops:.1f} of {practical.tflops:g} TFLOP/s measured; "
        f"{f.efficiency_pct:.1f}% of the {c.tflops:g} TFLOP/s datasheet)"
    )


def timed(
    s: Stage, t: TimingStats, c: rl.Ceilings | None, roofline_known: bool, practical: rl.Ceilings | None = None
) -> StageFigures:
    """A stage timed as a whole (its median), classified by its roofline position. ``roofline_known``: ``c`` are
    datasheet peaks (the roofline columns are filled); else ceilings measured at run time (class only). The key
    issue places it against ``practical`` (the measured roof Top 3 uses) with the datasheet peak beside it."""
    us = t.median_us
    tflops, gbps = rl.achieved_tflops(s.flops, us), rl.achieved_gbps(s.dram_bytes, us)
    f = StageFigures(
        name=s.name,
        precision=s.precision,
        flops=s.flops,
        dram_bytes=s.dram_bytes,
        model="plan",
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
    f.bottleneck = b.classify(f.compute_pct, f.memory_pct)
    if roofline_known:
        _place(f, c, s.flops, s.dram_bytes)
        assert f.efficiency_pct is not None
        if f.efficiency_pct > 100.0:
            issue = (
                f"beats its roofline bound ({f.efficiency_pct:.1f}%): inputs still in L2 from an earlier stage, "
                "or the FLOP/byte model or the timing is wrong"
            )
        elif f.bottleneck == "Latency":
            issue = f"neither unit busy: {f.compute_pct:.1f}% of {s.precision} peak, {f.memory_pct:.1f}% of DRAM peak"
        else:
            issue = _practical_words(f, s, c, practical)
    else:
        issue = (
            f"device not in devices.json: {f.compute_pct:.1f}% of measured {s.precision} ceiling, "
            f"{f.memory_pct:.1f}% of measured copy bandwidth"
        )
    if t.unstable:
        issue += f"; timing unstable (spread {t.spread_pct:.1f}%)"
    if (shape := t.shape()) is not None:
        issue += f"; {shape}"
    f.key_issue = issue
    return f


def untimed_model(s: StageTimeline) -> StageFigures:
    """A timeline stage with no FLOP/byte model: its time, nothing to classify it with."""
    return StageFigures(
        name=s.stage,
        precision="n/a",
        flops=None,
        dram_bytes=None,
        timing=s.gpu,
        duration_us=s.gpu.median_us,
        tflops=None,
        gbps=None,
        intensity=None,
        key_issue="no FLOP/byte model: not classified",
    )


def counted_precision(c: StageCounters) -> str:
    """Without a plan, the precision the counters show: the tensor cores' operand path that did most FLOPs, else fp32
    for CUDA-core floating-point work (Triton's arithmetic outside tl.dot), else n/a."""
    if c.tensor_paths:
        return max(c.tensor_paths.items(), key=lambda kv: kv[1])[0]
    return "fp32" if c.measured_flops else "n/a"


def counted(
    c: StageCounters, model: StageModel | None, ceiling: rl.Ceilings | None, roofline_known: bool
) -> StageFigures:
    """A stage from its ncu counters; with a model and datasheet ceilings also on the roofline."""
    # without a plan the work counted stands in for the model (tensor FLOPs alone where CUDA-core FLOPs were not
    # counted: a short metric list)
    flops = model.flops if model else c.measured_flops if c.measured_flops is not None else c.tensor_flops or None
    nbytes = model.dram_bytes if model else c.measured_bytes
    us = c.duration_us
    f = StageFigures(
        name=c.stage,
        precision=model.precision if model else counted_precision(c),
        flops=flops,
        dram_bytes=nbytes,
        model="plan" if model else "counters" if flops is not None or nbytes is not None else None,
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
    if ceiling is not None and roofline_known and flops is not None and nbytes is not None:
        _place(f, ceiling, flops, nbytes)
    facts = [
        f"TC {c.tc_pct:.1f}%" if c.tc_pct is not None else None,
        f"DRAM {c.dram_pct:.1f}%" if c.dram_pct is not None else None,
    ]
    lost = (
        None
        if model is None or not nbytes or c.measured_bytes is None
        else c.measured_bytes > b.EXCESS_TRAFFIC * nbytes
    )
    issue = (
        "; ".join([*model_mismatch(model, c), *c.issues(lost), ", ".join(x for x in facts if x)]) or "no counter read"
    )
    if f.efficiency_pct is not None and f.efficiency_pct > 100.0:
        issue = f"beats its roofline bound ({f.efficiency_pct:.1f}%): FLOP/byte model or timing is wrong; " + issue
    f.key_issue = issue
    return f


def with_timeline_facts(f: StageFigures, s: StageTimeline) -> None:
    """Append what the timeline saw of the stage to its key issue."""
    facts = [f"{s.overlapped_pct:.0f}% overlapped by other kernels"]
    if s.alone is not None:
        facts.append(f"{s.gpu.median_us / s.alone.median_us:.2f}x its alone time ({s.alone.median_us:.1f} us)")
    if s.launch_latency_us is not None:
        facts.append(f"launch latency {s.launch_latency_us:.1f} us")
    f.key_issue = f"{f.key_issue}; {', '.join(facts)}"


def roofline_root_cause(s: StageFigures, share: float, c: rl.Ceilings, measured: bool) -> str:
    """Why a timed stage is as fast as it is, from its roofline position."""
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


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def counter_root_cause(c: StageCounters, cls: b.StageClass | None, share: float) -> str:
    """Why a counted stage is as fast as it is, from its units' utilization."""
    where = (
        f"Stage {c.stage} takes {share:.0f}% of the profiled time with the tensor pipe at {_pct(c.tc_pct)}, "
        f"SM throughput at {_pct(c.sm_pct)} and DRAM at {_pct(c.dram_pct)} of peak"
    )
    if cls == "Memory":
        return f"{where}, so DRAM bandwidth sets its time."
    if cls == "Compute":
        return f"{where}, so the compute units set its time."
    return f"{where}, so no unit is saturated. Latency (occupancy, dependencies, launch size) sets its time."


def idle_root_cause(a: TimelineAnalysis) -> str:
    """Why a plan whose GPU idles most of each iteration is latency-bound."""
    return (
        f"The GPU was idle {a.idle_pct:.1f}% of the median {a.window_us:.1f} us analysed window (launch latency and "
        "gaps between launches), so no unit can average even half its peak over it. Host-side launch work and "
        "synchronization, not a GPU unit, set the time."
    )
