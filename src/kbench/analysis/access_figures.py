"""What an access run's trace predicts (access.json, kbench.capture.access_child), as the report's core: each stage's
figures (Duration the interpreter's wall time, no counters), the plan's class from the FLOP/byte model on the device's
practical roofs, and Top 3 from the catalogue's access entries over a predicted time per stage: its roofline time,
scaled by the sectors its lanes touch beyond those they use (memory-limited stages) or by the lanes masked off (the
others). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kbench.analysis import roofline as rl
from kbench.analysis.access_facts import Predicted, SiteFacts
from kbench.analysis.bottleneck import UNEVEN_PROGRAMS
from kbench.analysis.catalogue import memory
from kbench.analysis.catalogue.evidence import Evidence, Opportunity
from kbench.analysis.figures import PlanFigures
from kbench.analysis.opportunities import rank
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import KbenchError

ENTRIES = (memory.uncoalesced, memory.masked_lanes, memory.touched_beyond_model)
FEWER = (
    "Only {n} listed: a CPU trace sees addresses and masks only; latency, occupancy, pipelining and the tensor "
    "cores need a GPU run (--prof_type=event, then annotation). The gains are predicted upper bounds: each stage's "
    "roofline time on {device}'s practical roofs, scaled by the sectors its lanes touch beyond those they use (as if "
    "none came from L2) or by its masked lanes."
)


def words(values: dict[str, Any]) -> str:
    """Plan parameters as the report says them: "b=32, s=16"."""
    return ", ".join(f"{k}={v}" for k, v in values.items())


def point_words(outcome: dict[str, Any], stage: dict[str, Any] | None = None) -> str:
    """Where the facts come from, in words: the parameters traced and, for a sampled stage, how many programs."""
    said = f"at {words(outcome['values'])}"
    if stage is not None and sum(stage["traced_programs"]) < sum(stage["programs"]):
        said += f", {sum(stage['traced_programs'])} of {sum(stage['programs'])} programs traced"
    return said


def predicted_of(outcome: dict[str, Any]) -> dict[str, Predicted]:
    """Each stage's ``Predicted`` from an access run's access.json."""
    out: dict[str, Predicted] = {}
    for name, stage in outcome["stages"].items():
        facts = [SiteFacts.of(r) for r in stage["sites"]]
        p = Predicted.of(facts, point_words(outcome, stage), stage.get("config"))
        if p is not None:
            out[name] = replace(p, **_beyond(outcome, name, p), **_programs(stage.get("program_work")))
    return out


def _programs(work: dict[str, Any] | None) -> dict[str, Any]:
    """The per-program work spread of access.json's stage record (absent in runs before it was recorded)."""
    if not work:
        return {}
    # the largest programs that stand out of the mean (the first always)
    big = [(p, b) for i, (p, b) in enumerate(work["longest"]) if not i or b >= UNEVEN_PROGRAMS * work["mean_bytes"]]
    longest = tuple(f"program ({', '.join(map(str, p))}): {b:.3g} B" for p, b in big)
    return {
        "program_max_bytes": work["max_bytes"],
        "program_mean_bytes": work["mean_bytes"],
        "longest_programs": longest,
    }


def _beyond(outcome: dict[str, Any], name: str, p: Predicted) -> dict[str, Any]:
    """Distinct bytes over the model: at the traced point where every program ran, else at the check parameters."""
    model = (outcome.get("model") or {}).get(name, {}).get("dram_bytes")
    if p.distinct_bytes is not None and model:
        return {"beyond_model": p.distinct_bytes / model, "beyond_where": "at the traced point, every program"}
    check = outcome.get("check") or {}
    distinct, modelled = (check.get("distinct_bytes") or {}).get(name), (check.get("model_bytes") or {}).get(name)
    if distinct is None or not modelled:
        return {}
    where = f"at the check parameters ({words(check['values'])}), every program"
    return {"beyond_model": distinct / modelled, "beyond_where": where}


def _stage_figures(
    name: str, stage: dict[str, Any], model: dict[str, Any], roofs: dict[str, rl.Ceilings], note: str
) -> StageFigures:
    us = float(stage["seconds"]) * 1e6
    flops, nbytes, precision = model["flops"], model["dram_bytes"], model["precision"]
    c = roofs.get(precision)
    placed = c is not None and nbytes
    return StageFigures(
        name=name,
        precision=precision,
        flops=flops,
        dram_bytes=nbytes,
        model="plan",
        timing=TimingStats.of([us]),
        duration_us=us,
        tflops=None,
        gbps=None,
        intensity=rl.intensity(flops, nbytes),
        ridge=c.ridge if c else None,
        roof_tflops=rl.roof_tflops(c, flops, nbytes) if placed and c else None,
        bound_us=rl.bound_us(c, flops, nbytes) if placed and c else None,
        limiting_roof=rl.limiting_roof(c, flops, nbytes) if placed and c else None,
        key_issue=note,
    )


def predicted_us(bound: float, memory_limited: bool, p: Predicted | None) -> float:
    """A stage's predicted time: its roofline time on the practical roofs, times the sectors its lanes touch over
    those they use and the distinct bytes over the model's (memory-limited), or over the lanes left active (the
    others)."""
    if p is None:
        return bound
    if memory_limited:
        touched = (p.ld_sectors or 0.0) + (p.st_sectors or 0.0)
        needed = (p.ld_sectors or 0.0) * (p.ld_use or 32.0) / 32.0 + (p.st_sectors or 0.0) * (p.st_use or 32.0) / 32.0
        ratio = touched / needed if needed else 1.0
        beyond = p.beyond_model or 1.0
        return bound * max(1.0, ratio, beyond)
    return bound / max(0.01, 1.0 - p.masked_pct / 100.0)


def plan_access(stages: Sequence[StageFigures], sites: Sequence[SiteFacts]) -> dict[str, float | None]:
    """An access run's whole-plan facts, what its devlog entries and sweep rows compare instead of the interpreter's
    time: the stages' predicted times summed (None where one has none: a run before they were kept), bytes used per
    32-byte sector over every load and store line and at the worst, lanes masked off, bytes loaded and stored, the
    plan's model bytes and the distinct bytes (None where a sample of the programs ran). Pure."""
    p = Predicted.of(sites, "")
    times = [s.predicted_us for s in stages]
    model = [s.dram_bytes for s in stages]
    sectors = (p.ld_sectors or 0.0) + (p.st_sectors or 0.0) if p else 0.0
    used = (p.ld_sectors or 0.0) * (p.ld_use or 0.0) + (p.st_sectors or 0.0) * (p.st_use or 0.0) if p else 0.0
    return {
        "predicted_us": None if not times or None in times else sum(t or 0.0 for t in times),
        "sector_use": used / sectors if sectors else None,
        "worst_sector_use": p.worst.bytes_per_sector if p and p.worst else None,
        "masked_pct": p.masked_pct if p else None,
        "requested_bytes": float(p.requested_bytes) if p else None,
        "distinct_bytes": float(p.distinct_bytes) if p and p.distinct_bytes is not None else None,
        "model_bytes": None if not model or None in model else sum(m or 0.0 for m in model),
    }


def key_issue(p: Predicted | None) -> str:
    if p is None:
        return "no Triton load or store traced (a torch or library call runs no Triton kernel under the interpreter)"
    worst = p.worst
    use = f"{worst.bytes_per_sector:.1f} of 32 B per sector at {worst.line} ({worst.kind})" if worst else "n/a"
    return f"predicted on CPU: worst {use}; {p.masked_pct:.1f}% of lanes masked; Duration is interpreter time"


def predicted_figures(
    outcome: dict[str, Any], ceilings: dict[str, rl.Ceilings], practical: dict[str, rl.Ceilings], device: str
) -> PlanFigures:
    """The report's core for an access run (see the module's docstring). Pure. Every figure is placed on the
    device's practical roofs (the datasheet's where none was measured): the roofs its predicted times, its class and
    Top 3's gains use, so that the report gives one ridge point."""
    predictions = predicted_of(outcome)
    roofs = {**ceilings, **practical}
    figs = [
        _stage_figures(name, stage, outcome["model"][name], roofs, key_issue(predictions.get(name)))
        for name, stage in outcome["stages"].items()
    ]
    timed: list[tuple[StageFigures, float, rl.Ceilings | None]] = []
    for f in figs:
        pc = roofs.get(f.precision)
        if pc is None or f.flops is None or not f.dram_bytes:
            timed.append((f, 0.0, None))
            continue
        bound = rl.bound_us(pc, f.flops, f.dram_bytes)
        memory_limited = rl.limiting_roof(pc, f.flops, f.dram_bytes) == "memory"
        timed.append((f, predicted_us(bound, memory_limited, predictions.get(f.name)), pc))
    figs = [f.model_copy(update={"predicted_us": t if pc is not None else None}) for f, t, pc in timed]
    timed = [(f, t, pc) for f, (_, t, pc) in zip(figs, timed, strict=True)]
    total = sum(t for _, t, _ in timed)
    if total <= 0:
        raise KbenchError(
            "no stage has a FLOP/byte model on this device's roofs: access mode cannot rank what it found "
            f"(precisions {', '.join(sorted({f.precision for f in figs}))})"
        )
    found: list[Opportunity | None] = []
    for f, t, pc in timed:
        if pc is None:
            continue
        e = Evidence(
            stage=f.model_copy(update={"duration_us": t}),
            total_us=total,
            practical=pc,
            predicted=predictions.get(f.name),
            tile=dict(outcome["stages"][f.name].get("config") or {}),
        )
        found += [entry(e) for entry in ENTRIES]
    deciding, t, pc = max(timed, key=lambda x: x[1])
    assert pc is not None and deciding.flops is not None and deciding.dram_bytes
    limit = rl.limiting_roof(pc, deciding.flops, deciding.dram_bytes)
    plan_class = "Memory" if limit == "memory" else "Compute"
    root = (
        f"Predicted, no GPU ran: {deciding.name} holds {100 * t / total:.0f}% of the plan's predicted time on {device} "
        f"at {deciding.intensity or 0:.1f} FLOP/B against a ridge of {pc.ridge:.1f} FLOP/B, so {limit} sets it."
    )
    fewer = FEWER.format(n=1, device=device)
    used = {pc.source for _, _, pc in timed if pc is not None}
    ranked = rank(found, fewer=lambda n: FEWER.format(n=n, device=device), none=(_nothing(figs, predictions), fewer))
    return PlanFigures(
        stages=figs,
        total_us=sum(f.duration_us for f in figs),
        bottleneck=plan_class,
        root_cause=root,
        opportunities=ranked[0],
        opportunities_note=ranked[1],
        ceilings_source=f"{device}'s practical roofs ({'; '.join(sorted(used))}); the predicted times, the class "
        "and Top 3's gains use them",
        roofline_known=True,
        timer="interpreter",
    )


def _nothing(figs: list[StageFigures], predictions: dict[str, Predicted]) -> Opportunity:
    """Top 3's one line when the trace predicts no access defect: the worst line's figure, nothing to gain from it."""
    worst = min(
        ((n, p.worst) for n, p in predictions.items() if p.worst is not None),
        key=lambda x: x[1].bytes_per_sector or 32.0,
        default=None,
    )
    if worst is None:
        name = figs[0].name
        return Opportunity(
            name="No load or store traced: nothing to predict on CPU", gain_pct=0.0, metric=f"{name}.sites", value="0"
        )
    name, w = worst
    return Opportunity(
        name=f"No access defect predicted on CPU: every line uses at least {w.bytes_per_sector:.1f} of 32 bytes per "
        "sector and masks few lanes; measure on a GPU for the rest",
        gain_pct=0.0,
        metric=f"{name}.worst_bytes_per_sector_predicted",
        value=f"{w.bytes_per_sector:.1f}",
        named=True,
    )
