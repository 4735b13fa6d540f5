"""Analysis and rendering re-run on real H100 event-mode captures (tests/data/event_h100, see its README).

Re-analysing the raw samples must reproduce the figures the run reported: every number in a report traces
back to timings.json and the analytic model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kbench.analysis.compare import compare
from kbench.analysis.devices import load_devices
from kbench.analysis.figures import PlanFigures, from_timings
from kbench.analysis.roofline import Ceilings
from kbench.analysis.timing_stats import TimingStats
from kbench.plan.discovery import load_version
from kbench.report.models import ProfileResult
from kbench.report.render import render_report
from tests.conftest import DATA, contract_problems

RUNS = DATA / "event_h100"


def reanalyse(name: str, ceilings: dict[str, Ceilings] | None = None) -> tuple[PlanFigures, ProfileResult]:
    folder = RUNS / name
    params = json.loads((folder / "params.json").read_text())
    recorded = ProfileResult.model_validate_json((folder / "result.json").read_text())
    plan = load_version(params["kernel"], params["version"]).from_values(params["params"])
    samples = json.loads((folder / "timings.json").read_text())["stages"]
    timings = {stage: TimingStats.of(s["samples_us"]) for stage, s in samples.items()}
    known = ceilings is None
    if ceilings is None:
        ceilings = load_devices().devices[params["device"]["key"]].ceilings(params["device"]["key"])
    figures = from_timings(
        plan.checked_stages(), timings, ceilings, roofline_known=known, device_name=params["device"]["name"]
    )
    return figures, recorded


@pytest.mark.parametrize(
    ("run", "plan_class"),
    [
        ("vector_add_base", "Memory"),
        ("matmul_base", "Compute"),
        ("matmul_torch_mm", "Compute"),
        ("matmul_base_1024", "Latency"),
    ],
)
def test_reanalysis_reproduces_the_recorded_figures(run: str, plan_class: str) -> None:
    figures, recorded = reanalyse(run)
    assert figures.bottleneck == plan_class
    # every number (and the per-stage text) is what the run recorded; the root-cause wording may evolve
    # fields added after these runs were recorded: the samples' shape, and where flops/bytes come from
    new: dict[str, Any] = {"timing": {"drift_pct", "modes_us"}, "model": True}
    assert [s.model_dump(exclude=new) for s in figures.stages] == [s.model_dump(exclude=new) for s in recorded.stages]
    assert figures.total_us == recorded.figures.total_us
    assert figures.bottleneck == recorded.figures.bottleneck
    # given no measured ceilings the datasheet stands in as the practical roof: the gains are the recorded ones
    assert [(o.gain_pct, o.value) for o in figures.opportunities] == [
        (o.gain_pct, o.value) for o in recorded.figures.opportunities
    ]


def test_memory_bound_figures_are_consistent() -> None:
    figures, _ = reanalyse("vector_add_base")
    (add,) = figures.stages
    n = 1 << 26
    assert add.gbps == pytest.approx(12 * n / (add.duration_us * 1e-6) / 1e9)
    assert add.limiting_roof == "memory" and add.ridge == pytest.approx(66.9e12 / 3350e9)
    assert (
        add.efficiency_pct is not None and 80 < add.efficiency_pct < 100
    )  # a streaming add on an H100 runs near the DRAM roof
    (opp,) = figures.opportunities
    assert opp.gain_pct == pytest.approx(100 - add.efficiency_pct)
    assert opp.value == f"{add.efficiency_pct:.1f}%" and opp.metric == "add.practical_roof_pct"


def test_compute_bound_matmul_and_its_baseline_comparison() -> None:
    base, _ = reanalyse("matmul_base")
    cublas, _ = reanalyse("matmul_torch_mm")
    (mm,) = base.stages
    assert mm.limiting_roof == "compute" and mm.compute_pct == pytest.approx(mm.efficiency_pct)
    rows = {r.metric: r for r in compare(cublas, base)}
    change = 100 * (base.total_us - cublas.total_us) / cublas.total_us
    assert rows["Duration (us)"].change == f"{change:+.1f}%"
    assert rows["mm roofline efficiency (%)"].previous == f"{cublas.stages[0].efficiency_pct:.1f}"


@pytest.mark.parametrize("run", ["vector_add_base", "matmul_base", "matmul_torch_mm", "matmul_base_1024"])
def test_rendered_report_follows_the_contract_and_matches_the_run(tmp_path: Path, run: str) -> None:
    figures, recorded = reanalyse(run)
    result = recorded.model_copy(update={"figures": figures})
    text = render_report(result)
    out = tmp_path / "report.md"
    out.write_text(text)
    assert contract_problems(out) == []
    committed = (RUNS / run / "report.md").read_text()
    section = re.compile(r"## Stages.*?Bottleneck: \w+-bound", re.S)
    assert section.search(text).group(0) == section.search(committed).group(0)  # type: ignore[union-attr]
    assert "n/a | n/a | n/a" in text  # event mode measures no TC%, DRAM%, Occ%


def test_unknown_device_report_has_na_roofline_and_says_why(tmp_path: Path) -> None:
    # ceilings measured on this H100 by kbench.capture.ceilings (conf/devices.json, "measured"), used as if the
    # device were unknown: the class comes from them, the roofline columns stay n/a
    measured = load_devices().devices["H100_SXM"].measured
    ceilings = {
        "fp32": Ceilings(
            tflops=measured["peak_tflops_fp32"].value, gbps=measured["dram_gbps"].value, source="measured at run time"
        )
    }
    figures, recorded = reanalyse("vector_add_base", ceilings)
    (add,) = figures.stages
    assert add.bottleneck == "Memory" and add.bound_us is None and add.efficiency_pct is None
    (opp,) = figures.opportunities  # ranked by the distance to the measured ceilings
    bound = 12 * (1 << 26) / (ceilings["fp32"].gbps * 1e9) * 1e6
    assert opp.metric == "add.practical_roof_pct" and opp.gain_pct == pytest.approx(
        100 * (add.duration_us - bound) / add.duration_us
    )
    assert "measured DRAM ceiling" in figures.root_cause and figures.opportunities_note
    result = recorded.model_copy(update={"figures": figures, "device_key": None})
    out = tmp_path / "report.md"
    out.write_text(render_report(result))
    text = out.read_text()
    assert contract_problems(out) == []
    assert "(not in conf/devices.json)" in text and "| n/a | n/a | n/a |" in text
