"""vs Baseline: this run against an earlier one of the same kernel and parameters. Pure.

Durations change in percent, with "(within noise)" when the two runs' interquartile ranges overlap (the change
is then not beyond the spread of the repetitions); values that are already percentages change in percentage
points (pp)."""

from __future__ import annotations

from kbench.analysis.access_facts import Predicted
from kbench.analysis.figures import PlanFigures
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.model import Model


class BaselineRow(Model):
    metric: str
    previous: str
    current: str
    change: str


def within_noise(prev: TimingStats | None, cur: TimingStats | None) -> bool:
    """Whether two timings' interquartile ranges overlap; False when either has too few samples to say."""
    if prev is None or cur is None or prev.n < 5 or cur.n < 5:
        return False
    return prev.p25_us <= cur.p75_us and cur.p25_us <= prev.p75_us


def _row(
    metric: str,
    prev: float | None,
    cur: float | None,
    digits: int = 2,
    *,
    points: bool = False,
    noise: bool = False,
) -> BaselineRow:
    shown = ("n/a" if prev is None else f"{prev:.{digits}f}", "n/a" if cur is None else f"{cur:.{digits}f}")
    if prev is None or cur is None:
        change = "n/a"
    elif points:
        change = f"{cur - prev:+.1f} pp"
    else:
        change = f"{100.0 * (cur - prev) / prev:+.1f}%" if prev else "n/a"
        if noise and change != "n/a":
            change += " (within noise)"
    return BaselineRow(metric=metric, previous=shown[0], current=shown[1], change=change)


def compare(
    prev: PlanFigures,
    cur: PlanFigures,
    prev_plan: TimingStats | None = None,
    cur_plan: TimingStats | None = None,
) -> list[BaselineRow]:
    """The plan's duration first (its measured whole-plan median when both runs have one, else the sum of the
    stage medians), then each stage both runs have: duration and roofline efficiency. Where one run's time is Triton's
    CPU interpreter's (access mode beside a GPU run), the durations are shown and not compared."""
    gpu = prev.timer == cur.timer == "gpu"
    if prev_plan is not None and cur_plan is not None:
        rows = [_row("Duration (us)", prev_plan.median_us, cur_plan.median_us, noise=within_noise(prev_plan, cur_plan))]
    else:
        rows = [_row("Duration (us)", prev.total_us, cur.total_us)]
    before = {s.name: s for s in prev.stages}
    for s in cur.stages:
        p = before.get(s.name)
        if p is None:
            continue
        rows.append(
            _row(f"{s.name} duration (us)", p.duration_us, s.duration_us, noise=within_noise(p.timing, s.timing))
        )
        rows.append(_row(f"{s.name} roofline efficiency (%)", p.efficiency_pct, s.efficiency_pct, 1, points=True))
    if not gpu:
        rows = [r.model_copy(update={"change": NOT_COMPARED}) if "duration" in r.metric.lower() else r for r in rows]
    return rows


NOT_COMPARED = "not compared: CPU time under Triton's interpreter"  # access runs' time is never a speed


def compare_access(
    prev: dict[str, Predicted], cur: dict[str, Predicted], prev_figures: PlanFigures, cur_figures: PlanFigures
) -> list[BaselineRow]:
    """Two access runs (no GPU): the plan's time predicted on the device's practical roofs, then per stage both
    traced what the trace predicts (its predicted time, bytes used per 32-byte sector by loads and stores and at the
    worst line, sectors touched, masked lanes, bytes loaded and stored, distinct bytes over the model), each changing
    only where the code or the parameters did; the interpreter's time last, shown and never compared (CPU time)."""
    rows = [_row("Predicted time (us; on the device's roofs, not measured)", *_predicted(prev_figures, cur_figures))]
    before, after = {s.name: s for s in prev_figures.stages}, {s.name: s for s in cur_figures.stages}
    for name, p in prev.items():
        c = cur.get(name)
        if c is None:
            continue
        then, now = before.get(name), after.get(name)
        worst = (p.worst.bytes_per_sector if p.worst else None, c.worst.bytes_per_sector if c.worst else None)
        rows += [
            _row(f"{name} predicted time (us)", then.predicted_us if then else None, now.predicted_us if now else None),
            _row(f"{name} loads' bytes used per 32-B sector (predicted)", p.ld_use, c.ld_use, 1),
            _row(f"{name} stores' bytes used per 32-B sector (predicted)", p.st_use, c.st_use, 1),
            _row(f"{name} worst line's bytes used per 32-B sector (predicted)", *worst, 1),
            _row(
                f"{name} sectors touched (predicted)",
                _sum(p.ld_sectors, p.st_sectors),
                _sum(c.ld_sectors, c.st_sectors),
                0,
            ),
            _row(f"{name} masked lanes (%, predicted)", p.masked_pct, c.masked_pct, 1, points=True),
            _row(f"{name} bytes loaded and stored (predicted)", float(p.requested_bytes), float(c.requested_bytes), 0),
            _row(f"{name} distinct bytes / model (predicted)", _over(p, then), _over(c, now)),
        ]
    rows.append(_shown("Interpreter time (us; CPU, not GPU time)", prev_figures.total_us, cur_figures.total_us))
    return rows


def _predicted(prev: PlanFigures, cur: PlanFigures) -> tuple[float | None, float | None]:
    """The plans' predicted times: their stages' summed (None where a stage has none: a run before they were kept)."""
    sums = [[s.predicted_us for s in f.stages] for f in (prev, cur)]
    then, now = (None if None in t or not t else sum(x or 0.0 for x in t) for t in sums)
    return then, now


def _sum(*values: float | None) -> float | None:
    return None if all(v is None for v in values) else sum(v or 0.0 for v in values)


def _over(p: Predicted, stage: StageFigures | None) -> float | None:
    """Distinct bytes over the plan's model, where every program ran (a sample's distinct bytes are not known)."""
    return p.distinct_bytes / stage.dram_bytes if p.distinct_bytes is not None and stage and stage.dram_bytes else None


def _shown(metric: str, prev: float | None, cur: float | None) -> BaselineRow:
    """A row whose values are shown and never compared (a CPU's time beside a GPU's, or two interpreter times)."""
    row = _row(metric, prev, cur)
    return row.model_copy(update={"change": NOT_COMPARED})
