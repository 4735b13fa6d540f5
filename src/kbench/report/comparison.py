"""`kbench compare A B`: two finished runs' figures side by side (the vs Baseline table of the report, for any two
runs), and what cannot be compared between them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from kbench.analysis.compare import BaselineRow, compare, compare_access
from kbench.analysis.devices import chip_name
from kbench.analysis.figures import PlanFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import UsageError
from kbench.model import Model
from kbench.plan.clone import copied_from
from kbench.report import folder
from kbench.report.models import load_result
from kbench.report.sections import Sections
from kbench.report.source import change


class Comparison(Model):
    a: str  # the earlier (baseline) run folder
    b: str  # the later (current) run folder
    a_label: str  # kernel version mode params
    b_label: str
    rows: list[BaselineRow]  # plan duration, then per stage both have: duration, roofline efficiency
    source_changed: bool | None  # whether the source that ran differs (None: one of the runs recorded none)
    notes: list[str]  # what differs between the runs and what could not be compared; the first, their source
    legend: str = Field(default="", description="how the Change column is computed")


GPU_LEGEND = (
    "Durations change in percent, '(within noise)' where the two runs' interquartile ranges overlap; efficiencies in "
    "percentage points."
)
ACCESS_LEGEND = (
    "Predicted figures (from each run's trace on the CPU: the same code and parameters predict the same) change in "
    "percent, masked lanes in percentage points; interpreter times are CPU time and are not compared."
)


TWO = "`kbench compare OTHER_RUN RUN`"  # how the command line compares two runs named (the MCP tool: its own call)


def previous_of(run_dir: Path, allowed: Callable[[Path], object] = Path, two: str = TWO) -> Path:
    """The latest finished run before ``run_dir`` of the same mode, kernel and parameters (a shipped package's copy:
    else of the package it was copied from). ``allowed`` sees each folder searched (``run_dir``'s parent, the
    origin's) before it is read and the result of the run found, and raises to refuse one (``kbench mcp``'s roots: a
    root that is itself a run folder has its parent outside). None found: one line saying so, and ``two``: how the
    caller compares two runs named."""
    if run_dir.is_dir():
        allowed(run_dir.parent)
    found = folder.previous_run(run_dir, allowed) if run_dir.is_dir() else None
    if found is None:
        made = folder.made_with(run_dir / folder.PARAMS)
        kernel = made.get("kernel")
        origin = copied_from(kernel) if isinstance(kernel, str) else None
        also = f" (nor of {origin}, which {kernel} is a copy of)" if origin else ""
        raise UsageError(
            f"{run_dir} has no earlier finished run of the same mode, kernel and parameters{also}: it is the first; "
            f"compare it with a run you name: {two}"
        )
    allowed(found / folder.RESULT)
    return found


def compare_asked(
    a: Path, b: Path | None, previous: bool, flag: str, allowed: Callable[[Path], object] = Path, two: str = TWO
) -> Comparison:
    """Two run folders, or one and its previous run (``flag`` names how the caller spells that option, ``two`` how
    it compares two runs; ``allowed`` as for ``previous_of``)."""
    if previous == (b is not None):
        raise UsageError(f"give two run folders, or one and {flag}")
    return compare_runs(previous_of(a, allowed, two), a) if b is None else compare_runs(a, b)


def compare_runs(a_dir: Path, b_dir: Path) -> Comparison:
    a, b = load_result(a_dir), load_result(b_dir)
    code = change(a.source, b.source)
    notes = [f"source: {code.line}"]
    pairs = ((b.kernel, a.kernel), (a.kernel, b.kernel))
    if copy := next(((c, o) for c, o in pairs if c != o and copied_from(c) == o), None):
        notes.append(f"{copy[0]} is the copy of {copy[1]} kbench clone made: their stages compared by name")
    elif a.kernel != b.kernel:
        notes.append(f"different kernels ({a.kernel}, {b.kernel}): only stages of the same name are compared")
    if a.params != b.params:
        notes.append(f"different parameters ({a.params} vs {b.params}): the durations are not like for like")
    if a.mode != b.mode:
        notes.append(
            f"different modes ({a.mode}, {b.mode}): durations come from different timers "
            f"({a.timing_method or 'n/a'} / {b.timing_method or 'n/a'}); compare changes, not small differences"
        )
    chips = chip_name(a.device, a.device_key), chip_name(b.device, b.device_key)  # a CPU run names its chip otherwise
    if chips[0] != chips[1]:
        notes.append(f"different devices ({chips[0]}, {chips[1]})")
    a_stages = {s.name for s in a.figures.stages}
    b_stages = {s.name for s in b.figures.stages}
    if only := sorted(a_stages - b_stages):
        notes.append(f"only in {a_dir.name}: {', '.join(only)} (not compared)")
    if only := sorted(b_stages - a_stages):
        notes.append(f"only in {b_dir.name}: {', '.join(only)} (not compared)")
    interpreted = [f"{r.kernel} {r.version}" for r in (a, b) if r.figures.timer == "interpreter"]
    if len(interpreted) == 2:  # access mode: the CPU's time under Triton's interpreter is never compared as a speed
        notes.append(
            "no GPU ran in either run (access mode): their times are the CPU's under Triton's interpreter, shown and "
            "not compared; the rows compare what the traces predict for the device"
        )
    elif interpreted:
        notes.append(
            f"{interpreted[0]} ran no GPU (access mode): its time is the CPU's under Triton's interpreter, not "
            "compared with the other run's GPU time"
        )
    elif a.plan_timing is None or b.plan_timing is None:
        notes.append("the plan's duration is the sum of its stage medians (one run has no whole-plan measurement)")
    return Comparison(
        a=str(a_dir),
        b=str(b_dir),
        a_label=f"{a.kernel} {a.version} ({a.mode})",
        b_label=f"{b.kernel} {b.version} ({b.mode})",
        rows=rows_between(a.figures, a.plan_timing, a.sections, b.figures, b.plan_timing, b.sections),
        source_changed=code.changed,
        notes=notes,
        legend=ACCESS_LEGEND if len(interpreted) == 2 else GPU_LEGEND,
    )


def rows_between(
    prev: PlanFigures,
    prev_plan: TimingStats | None,
    prev_sections: Sections,
    cur: PlanFigures,
    cur_plan: TimingStats | None,
    cur_sections: Sections,
) -> list[BaselineRow]:
    """The rows of vs Baseline and `kbench compare`: two access runs (no GPU) by what their traces predict and the
    interpreter's time, said to be CPU time; any others by their durations and efficiencies."""
    then, now = prev_sections.accesses, cur_sections.accesses
    if then is not None and now is not None:
        return compare_access(then.predicted(), now.predicted(), prev, cur)
    return compare(prev, cur, prev_plan, cur_plan)


def markdown(c: Comparison) -> str:
    """The comparison as the report's vs Baseline table, with its notes below it."""
    lines = [
        f"A: `{c.a}` {c.a_label}",
        f"B: `{c.b}` {c.b_label}",
        "",
        "| Metric | A | B | Change |",
        "|---|---|---|---|",
        *(f"| {r.metric} | {r.previous} | {r.current} | {r.change} |" for r in c.rows),
    ]
    lines += ["", c.legend or GPU_LEGEND]
    lines += [f"- {n}" for n in c.notes]
    return "\n".join(lines)
