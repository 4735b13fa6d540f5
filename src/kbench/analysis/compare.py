"""vs Baseline: this run against an earlier one of the same kernel and parameters. Pure."""

from __future__ import annotations

from pydantic import BaseModel

from kbench.analysis.figures import PlanFigures


class BaselineRow(BaseModel):
    metric: str
    previous: str
    current: str
    change: str


def _row(metric: str, prev: float | None, cur: float | None, digits: int = 2) -> BaselineRow:
    if prev is None or cur is None:
        return BaselineRow(
            metric=metric,
            previous="n/a" if prev is None else f"{prev:.{digits}f}",
            current="n/a" if cur is None else f"{cur:.{digits}f}",
            change="n/a",
        )
    change = f"{100.0 * (cur - prev) / prev:+.1f}%" if prev else "n/a"
    return BaselineRow(metric=metric, previous=f"{prev:.{digits}f}", current=f"{cur:.{digits}f}", change=change)


def compare(
    prev: PlanFigures, cur: PlanFigures, prev_plan_us: float | None = None, cur_plan_us: float | None = None
) -> list[BaselineRow]:
    """The plan's duration first (its measured whole-plan median when both runs have one, else the sum of the
    stage medians), then each stage both runs have: duration and roofline efficiency."""
    both = prev_plan_us is not None and cur_plan_us is not None
    rows = [_row("Duration (us)", prev_plan_us if both else prev.total_us, cur_plan_us if both else cur.total_us)]
    before = {s.name: s for s in prev.stages}
    for s in cur.stages:
        p = before.get(s.name)
        if p is None:
            continue
        rows.append(_row(f"{s.name} duration (us)", p.duration_us, s.duration_us))
        rows.append(_row(f"{s.name} roofline efficiency (%)", p.efficiency_pct, s.efficiency_pct, 1))
    return rows
