"""The files an Nsight Compute capture adds to a run folder: the tidy tables (kernels.csv, rules.csv) and, for the
deep dive, report-verbose.md (every rule and metric) with the annotated source and SASS of each stage."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbench.analysis import ncu, ncu_source
from kbench.fsutil import safe, write_text_atomic
from kbench.report.models import ProfileResult
from kbench.report.render import render_verbose

Grouped = list[tuple[str, list[ncu.Kernel]]]


def _csv(path: Path, rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    """Rows as CSV, a missing value (None) as an empty field (no pandas on the analysis path: it costs ~0.3 s)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        w.writerows([["" if r.get(c) is None else r[c] for c in columns] for r in rows])


def tables(grouped: Grouped, run_dir: Path) -> None:
    stage_of = {k.index: name for name, ks in grouped for k in ks}
    kernels = [k for _, ks in grouped for k in ks]
    rows = ncu.kernels_table(kernels, stage_of)
    _csv(run_dir / "kernels.csv", rows, list(rows[0]) if rows else [])
    _csv(run_dir / "rules.csv", ncu.rules_table(kernels, stage_of), ncu.RULE_COLUMNS)


def deep_dive(result: ProfileResult, grouped: Grouped, run_dir: Path) -> None:
    assert result.sections.counters is not None
    actions = ncu.load_actions(run_dir / result.sections.counters.source)
    stages: list[dict[str, object]] = []
    for name, ks in grouped:
        stages.append(
            {"name": name, "kernels": ks, "metrics": {k.index: ncu.all_metrics(actions[k.index]) for k in ks}}
        )
        _source(run_dir, name, [(k, actions[k.index]) for k in ks])
    write_text_atomic(run_dir / "report-verbose.md", render_verbose(result, stages))


def _source(run_dir: Path, stage: str, kernels: list[tuple[ncu.Kernel, Any]]) -> None:
    """sass/<stage>-<kernel>.csv: each SASS instruction's line, executions and stall samples (source/<stage>.md,
    the same summed by line, is report.lines's)."""
    (run_dir / "sass").mkdir(exist_ok=True)
    for k, action in kernels:
        rows = ncu_source.sass_rows(action)
        with (run_dir / "sass" / f"{safe(stage)}-{k.index}.csv").open("w", newline="") as f:
            writer = csv.DictWriter(
                f,
                fieldnames=["pc", "file", "line", "sass", "inst_executed", "stall_samples", "top_stall"],
                extrasaction="ignore",
            )
            writer.writeheader()
            writer.writerows(rows)
