"""Access mode runs no GPU: its durations are Triton's CPU interpreter's wall time. They must never pass for GPU time
(report.json's source, the whole plan's rates, kbench devlog's heading and rates), and its report names one device
and one ridge point, those its predicted times and gains use (issue 41)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kbench.report.models import ProfileResult


@pytest.fixture(scope="module")
def access_run(tmp_path_factory: pytest.TempPathFactory) -> ProfileResult:
    from kbench.api import access_profile_plan
    from kbench.plan.discovery import load_version

    plan = load_version("matmul", "v2").from_values({"m": 256, "n": 256, "k": 256})
    return access_profile_plan(plan, out_dir=tmp_path_factory.mktemp("out"), device="H100_SXM")


@pytest.mark.slow
def test_report_json_tags_interpreter_time_as_such_never_as_measured(access_run: ProfileResult) -> None:
    data = json.loads((access_run.path / "report.json").read_text())
    (stage,) = data["stages"]
    assert stage["duration_us"]["source"] == "interpreter" and "not GPU time" in stage["duration_us"]["by"]
    assert data["plan"]["duration_us"]["source"] == "interpreter"
    assert stage["tflops"]["value"] is None and stage["gbps"]["value"] is None


def test_the_schema_allows_interpreter_as_a_source() -> None:
    schema = json.loads((Path(__file__).parents[1] / "docs" / "schema" / "report.schema.json").read_text())
    assert "interpreter" in schema["$defs"]["Value"]["properties"]["source"]["enum"]


@pytest.mark.slow  # the module's access run
def test_the_whole_plan_has_no_achieved_rates_from_interpreter_time(access_run: ProfileResult) -> None:
    from kbench.report.models import totals

    plan = totals(access_run)
    assert plan.duration_us > 0 and plan.tflops is None and plan.gbps is None


@pytest.mark.slow  # the module's access run
def test_devlog_says_predicted_for_the_device_with_no_gpu_and_no_achieved_rates(
    access_run: ProfileResult, tmp_path: Path
) -> None:
    from kbench.report import devlog

    _, text = devlog.append(access_run, access_run.path, tmp_path, [])
    device = "NVIDIA H100 SXM5 80GB"
    assert f"**Performance** (predicted for {device}, no GPU used, " in text
    assert "| Achieved TFLOPs/s | n/a |" in text and "| Achieved GB/s | n/a |" in text
    assert "| Interpreter time (CPU, not GPU time) |" in text and "| Duration |" not in text


@pytest.mark.slow  # the module's access run
def test_one_ridge_and_one_device_name_per_access_report(access_run: ProfileResult) -> None:
    text = access_run.report_md
    ridges = set(re.findall(r"ridge of (\d+(?:\.\d+)?) FLOP/B", text))
    (row,) = [line for line in text.splitlines() if line.startswith("| mm | fp16 |")]
    table_ridge = row.split("|")[6].strip()
    assert len(ridges) == 1 and float(table_ridge) == pytest.approx(float(ridges.pop()), abs=0.05)
    names = {"NVIDIA H100 SXM5 80GB", "NVIDIA H100 80GB HBM3"}
    assert [n for n in names if n in text] == ["NVIDIA H100 SXM5 80GB"]
    assert "practical roofs" in text.split("## Roofline")[1].splitlines()[2]
