"""report.json: report.md's facts for programs, every number tagged with where it came from.

``measured``: read by a tool (``by`` names the tool and the metric or timer); ``interpreter``: a duration timed on the
CPU while Triton's interpreter ran the kernel (access mode: no GPU ran, never GPU time); ``analytic``: the plan's
FLOP/byte model; ``derived``: computed from other values (``by`` is the formula, ``inputs`` its operands); ``n/a``: not
measured or not modelled in this run (``value`` is null). The schema is versioned (``SCHEMA_VERSION``) and exported to
docs/schema/report.schema.json (``python -m kbench.report.report_json > docs/schema/report.schema.json``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from kbench.analysis.catalogue.evidence import Opportunity
from kbench.analysis.compare import BaselineRow
from kbench.analysis.ncu import ALIASES
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.analysis.waterfall import KernelPart, Step, Waterfall
from kbench.model import Model
from kbench.report import kernels_json
from kbench.report.models import ProfileResult, totals
from kbench.report.source import Source as CodeSource
from kbench.report.values import Value, _derived, _measured

SCHEMA_VERSION: Literal["1"] = "1"
SCHEMA_ID = f"https://kbench.dev/schema/report-{SCHEMA_VERSION}.json"
INTERPRETED = "Triton's CPU interpreter: the wall time of {what} (no GPU ran; not GPU time)"


class StageReport(Model):
    name: str
    precision: str
    duration_us: Value
    timing: TimingStats  # the distribution behind duration_us (n = 1 for a single ncu measurement)
    tc_pct: Value
    dram_pct: Value
    occ_pct: Value
    flops: Value
    dram_bytes: Value
    intensity: Value
    ridge: Value
    tflops: Value
    gbps: Value
    bound_us: Value
    efficiency_pct: Value
    limiting_roof: str | None
    bottleneck: str | None
    key_issue: str
    # the issue roof (counter modes): warp instructions issued, the % of the issue roof they fill, modelled FLOPs per
    # issued instruction
    issued: Value | None = None
    issue_roof_pct: Value | None = None
    flops_per_issue: Value | None = None


class Location(Model):
    """Where an item is: the stage and kernel it is about and the source line it names (each None where it names
    none: a plan-wide item, or one no line carries)."""

    stage: str | None
    kernel: str | None
    file: str | None  # the file's name, as report.md quotes it
    line: int | None
    code: str | None  # the line's text as the capture recorded it (None where the source was not at hand)


class Trigger(Model):
    """The measured value that triggered an item: as report.md writes it (``text``), and as a number with its unit
    (``value`` None where the value is a word: tf32, mma.sync, none)."""

    metric: str
    text: str
    value: float | None
    unit: str | None


class OpportunityReport(Model):
    rank: int
    name: str
    gain_pct: Value  # derived: ``by`` is its formula (then what it models), ``inputs`` the formula's operands
    trigger_metric: str
    trigger_value: str
    change: str | None
    named: bool  # the catalogue named a mechanism (or that the stage is done) from this run's data
    # no edit of the kernel in its language and structure reaches it; the change says what would
    structural: bool = False
    location: Location | None = None
    trigger: Trigger | None = None


class PlanReport(Model):
    duration_us: Value
    bottleneck: str
    root_cause: str


class Roofline(Model):
    ceilings_source: str
    practical_source: str | None
    chart: str | None


class Environment(Model):
    device: str
    device_key: str | None
    clocks: str | None
    check: str | None
    tools: dict[str, Any]
    source: CodeSource | None  # the source the plan ran, by sha256 (None: not tracked, or not recorded by the capture)
    notes: list[str]
    offline: bool


class DistanceReport(Model):
    """A stage's distance waterfall (report.md's Distance): the time on its practical roof, each step a measured
    cause (us and points: shares of the plan's time), what no step explains."""

    stage: str
    kernel: str | None
    roof: str
    roof_us: float
    measured_us: float
    gap_points: float
    steps: list[Step]
    unexplained_us: float
    unexplained_points: float
    counted: bool  # counters measured the stage (its unexplained rest never leads Top 3)
    not_measured: list[str]
    kernels: list[KernelPart]  # a stage of several kernels: each one's time and measured DRAM bytes


def _distance(w: Waterfall) -> DistanceReport:
    return DistanceReport(
        **w.model_dump(exclude={"total_us"}), gap_points=w.gap_points, unexplained_points=w.unexplained_points
    )


class ReportJson(Model):
    schema_version: Literal["1"] = SCHEMA_VERSION
    kernel: str
    version: str
    mode: str
    params: dict[str, Any]
    timing_method: str
    stages: list[StageReport]
    plan: PlanReport
    top3: list[OpportunityReport]
    opportunities_note: str | None
    roofline: Roofline
    distance: list[DistanceReport] = Field(default_factory=list)  # per stage with a practical roof
    distance_chart: str | None = None  # distance.png, where drawn
    baseline: list[BaselineRow] | None
    baseline_source: str | None
    baseline_code: str | None  # what changed in the source that ran since the baseline run, in one line
    baseline_code_changed: bool | None  # None: no baseline, or one of the two runs recorded no source
    sections: dict[str, Any]  # the report's mode sections (timing, timeline, counters, conformance, tiling) as data
    environment: Environment
    files: list[tuple[str, str]]


def _metric(key: str) -> str:
    return f"ncu: {ALIASES[key][0]}"


def _interpreted(value: float, what: str) -> Value:
    """A time the CPU took while Triton's interpreter ran the kernel (access mode): never tagged as GPU time."""
    return Value(value=value, unit="us", source="interpreter", by=INTERPRETED.format(what=what))


def _duration(r: ProfileResult, s: StageFigures) -> Value:
    if r.figures.timer == "interpreter":
        return _interpreted(s.duration_us, "its traced launch")
    return _measured(s.duration_us, "us", _duration_by(r, s))


def _plan_duration(r: ProfileResult, plan_us: float, plan_by: str | None) -> Value:
    if r.figures.timer == "interpreter":
        return _interpreted(plan_us, "the stages, summed")
    return _measured(plan_us, "us", plan_by) if plan_by else _derived(plan_us, "us", "sum of the stages' duration_us")


def _duration_by(r: ProfileResult, s: StageFigures) -> str:
    if r.mode in ("annotation", "ncu"):
        return f"{_metric('duration_ns')} (its kernels summed)"
    what = "median over the timeline's windows" if r.mode == "nsys" else f"median of {s.timing.n} repetitions"
    return f"{r.timing_method or r.mode}; {what}"


def _model(s: StageFigures, value: float | None, unit: str, field: str) -> Value:
    if value is None:
        return Value(value=None, unit=unit, source="n/a", by="no FLOP/byte model and nothing counted")
    if s.model == "counters":
        by = (
            "ncu: tensor-core ops, plus FP instructions where counted"
            if field == "flops"
            else "ncu: dram__bytes_read.sum + write"
        )
        return Value(value=value, unit=unit, source="measured", by=by)
    return Value(value=value, unit=unit, source="analytic", by=f"the plan's model: Stage.{field}")


def stage_report(r: ProfileResult, s: StageFigures) -> StageReport:
    roof = f"roofline of {r.figures.ceilings_source}"
    return StageReport(
        name=s.name,
        precision=s.precision,
        duration_us=_duration(r, s),
        timing=s.timing,
        tc_pct=_measured(s.tc_pct, "%", s.counted_by.get("tc_pct") or _metric("tc_pct")),
        dram_pct=_measured(s.dram_pct, "%", s.counted_by.get("dram_pct") or _metric("dram_pct")),
        occ_pct=_measured(s.occ_pct, "%", _metric("occupancy_pct")),
        flops=_model(s, s.flops, "FLOP", "flops"),
        dram_bytes=_model(s, s.dram_bytes, "B", "dram_bytes"),
        intensity=_derived(s.intensity, "FLOP/B", "flops / dram_bytes", flops=s.flops, dram_bytes=s.dram_bytes),
        ridge=_derived(s.ridge, "FLOP/B", f"peak TFLOP/s / peak GB/s ({roof})"),
        tflops=_derived(s.tflops, "TFLOP/s", "flops / duration_us / 1e6", flops=s.flops, duration_us=s.duration_us),
        gbps=_derived(
            s.gbps, "GB/s", "dram_bytes / duration_us / 1e3", dram_bytes=s.dram_bytes, duration_us=s.duration_us
        ),
        bound_us=_derived(
            s.bound_us,
            "us",
            f"max(flops / peak FLOP/s, dram_bytes / peak bandwidth) ({roof})",
            flops=s.flops,
            dram_bytes=s.dram_bytes,
        ),
        efficiency_pct=_derived(
            s.efficiency_pct, "%", "100 * bound_us / duration_us", bound_us=s.bound_us, duration_us=s.duration_us
        ),
        limiting_roof=s.limiting_roof,
        bottleneck=s.bottleneck,
        key_issue=s.key_issue,
        issued=_measured(s.issued, "warp instructions", f"{_metric('inst_issued')} (else smsp__inst_executed.sum)"),
        issue_roof_pct=_derived(
            s.issue_roof_pct,
            "%",
            "100 * issued / (issue_per_clock x SMs x measured SM clock x duration)",
            issued=s.issued,
        ),
        flops_per_issue=_derived(s.flops_per_issue, "FLOP", "flops / issued / 32", flops=s.flops, issued=s.issued),
    )


def _number(text: str) -> float | None:
    """A trigger's value as a number (``21.7%`` -> 21.7, ``1.53x`` -> 1.53); None for a word."""
    try:
        return float(text.removesuffix("%").removesuffix("x"))
    except ValueError:
        return None


def _opportunity(rank: int, o: Opportunity, against: str) -> OpportunityReport:
    # an item with no gain model is a placeholder (nothing gave an estimate): its 0 is the formula
    formula = o.formula or "0"
    number = _number(o.value)
    return OpportunityReport(
        rank=rank,
        name=o.name,
        gain_pct=Value(
            value=o.gain_pct,
            unit="% of the plan's time",
            source="derived",
            by=f"{formula}: the catalogue's model of this mechanism from {o.metric} = {o.value}, against {against}",
            inputs=o.inputs,
        ),
        trigger_metric=o.metric,
        trigger_value=o.value,
        change=o.change,
        named=o.named,
        structural=o.structural,
        location=Location(stage=o.stage, kernel=o.kernel, file=o.file, line=o.line, code=o.code),
        trigger=Trigger(
            metric=o.metric, text=o.value, value=number, unit=o.trigger_unit if number is not None else None
        ),
    )


def build(r: ProfileResult) -> ReportJson:
    f = r.figures
    against = f.practical_source or f.ceilings_source
    plan_by = (
        f"the whole plan measured as one ({r.timing_method or r.mode}): median of {r.plan_timing.n}"
        if r.plan_timing
        else None
    )
    plan_us = totals(r).duration_us
    baseline = r.sections.baseline
    return ReportJson(
        kernel=r.kernel,
        version=r.version,
        mode=r.mode,
        params=r.params,
        timing_method=r.timing_method,
        stages=[stage_report(r, s) for s in f.stages],
        plan=PlanReport(
            duration_us=_plan_duration(r, plan_us, plan_by),
            bottleneck=f.bottleneck,
            root_cause=f.root_cause,
        ),
        top3=[_opportunity(i, o, against) for i, o in enumerate(f.opportunities, 1)],
        opportunities_note=f.opportunities_note,
        roofline=Roofline(ceilings_source=f.ceilings_source, practical_source=f.practical_source, chart=r.chart),
        distance=[_distance(w) for w in f.waterfalls],
        distance_chart=r.waterfall_chart,
        baseline=baseline.rows if baseline else None,
        baseline_source=baseline.source if baseline else None,
        baseline_code=(baseline.code or None) if baseline else None,
        baseline_code_changed=baseline.code_changed if baseline else None,
        sections={
            **{
                name: getattr(r.sections, name).model_dump(mode="json")
                for name in r.sections.present(r.sections.AFTER_ROOFLINE)
            },
            # each stage's PM-sampled counters and its kernels', where event mode sampled them
            **(
                {
                    "sampling": {
                        "sampler": r.sections.timing.sampler,
                        "stages": [s.model_dump(mode="json") for s in r.sections.timing.sampled],
                    }
                }
                if r.sections.timing and r.sections.timing.sampled
                else {}
            ),
            # the kernels each stage ran, where the mode measured them (kbench.report.kernels_json)
            **(
                {"kernels": [k.model_dump(mode="json") for k in kernels_json.build(f.kernels, r.kernel_times())]}
                if f.kernels
                else {}
            ),
        },
        environment=Environment(
            device=r.device,
            device_key=r.device_key,
            clocks=r.clocks or None,
            check=r.check,
            tools=r.tools,
            source=r.source,
            notes=r.notes,
            offline=r.offline,
        ),
        files=r.files,
    )


def schema() -> dict[str, Any]:
    """The JSON Schema of report.json, with its id and version."""
    return {"$id": SCHEMA_ID, **ReportJson.model_json_schema()}


if __name__ == "__main__":
    print(json.dumps(schema(), indent=1, sort_keys=True))
