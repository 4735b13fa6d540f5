"""vs Baseline: this run against an earlier one of the same kernel and parameters. Pure.

Durations change in percent, with "(within noise)" when the two runs' interquartile ranges overlap (the change
is then not beyond the spread of the repetitions); values that are already percentages change in percentage
points (pp)."""

from __future__ import annotations

from kbench.analysis.access_facts import Predicted
from kbench.analysis.figures import PlanFigures
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
    stage medians), then each stage both runs have: duration and roofline efficiency."""
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
    return rows


def compare_access(
    prev: dict[str, Predicted], cur: dict[str, Predicted], prev_figures: PlanFigures, cur_figures: PlanFigures
) -> list[BaselineRow]:
    """Two access runs (no GPU): per stage both traced, what the trace predicts (bytes used per sector of the worst
    line, masked lanes, bytes loaded and stored), then the interpreter's time, which is CPU time and not the GPU's."""
    rows = []
    for name, p in prev.items():
        c = cur.get(name)
        if c is None:
            continue
        worst = (p.worst.bytes_per_sector if p.worst else None, c.worst.bytes_per_sector if c.worst else None)
        rows += [
            _row(f"{name} worst line's bytes used per 32-B sector (predicted)", *worst, 1),
            _row(f"{name} masked lanes (%, predicted)", p.masked_pct, c.masked_pct, 1, points=True),
            _row(f"{name} bytes loaded and stored (predicted)", float(p.requested_bytes), float(c.requested_bytes), 0),
        ]
    rows.append(_row("Interpreter time (us; CPU, not GPU time)", prev_figures.total_us, cur_figures.total_us))
    return rows
