"""Access mode runs no GPU: its durations are Triton's CPU interpreter's wall time. They must never pass for GPU time
(report.json's source, the whole plan's rates, kbench devlog's heading and rates), and its report names one device
and one ridge point, those its predicted times and gains use (issue 41)."""

from __future__ import annotations

import json
import re
import shutil
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


def _twin(run: Path, where: Path, slower: float) -> Path:
    """A copy of an access run whose interpreter ran ``slower`` times as long: the same source, the same trace."""
    copy = where / run.name
    shutil.copytree(run, copy)
    data = json.loads((copy / "result.json").read_text())
    data["figures"]["total_us"] *= slower
    for s in data["figures"]["stages"]:
        s["duration_us"] *= slower
    (copy / "result.json").write_text(json.dumps(data))
    return copy


def test_two_access_runs_of_unchanged_source_compare_their_predictions_never_their_times(
    access_run: ProfileResult, tmp_path: Path
) -> None:
    """issue 50: `kbench compare` gave `+14.1%` for the interpreter's time of unchanged source. The interpreter's
    time is shown, not compared; what the traces predict is, and it does not move."""
    from kbench.analysis.compare import NOT_COMPARED
    from kbench.report.comparison import compare_runs, markdown

    twin = _twin(access_run.path, tmp_path, 1.141)
    c = compare_runs(access_run.path, twin)
    rows = {r.metric: r for r in c.rows}
    (time,) = [r for m, r in rows.items() if m.startswith("Interpreter time")]
    assert time.change == NOT_COMPARED and time.previous != time.current
    predicted = rows["Predicted time (us; on the device's roofs, not measured)"]
    assert predicted.previous == predicted.current != "n/a" and predicted.change == "+0.0%"
    for fact in ("loads' bytes used per 32-B sector", "sectors touched", "masked lanes", "bytes loaded and stored"):
        (row,) = [r for m, r in rows.items() if m.startswith(f"mm {fact}")]
        assert row.previous == row.current != "n/a" and row.change in ("+0.0%", "+0.0 pp"), row
    assert not [r for r in c.rows if r.change.endswith("%") and r.previous != r.current]
    text = markdown(c)
    assert "interpreter times are CPU time and are not compared" in text and "within noise" not in text
    assert any("no GPU ran in either run" in n for n in c.notes)


def test_an_access_run_beside_a_gpu_run_compares_no_durations(access_run: ProfileResult) -> None:
    from kbench.analysis.compare import NOT_COMPARED
    from kbench.report.comparison import compare_runs

    gpu = Path(__file__).parents[1] / "docs" / "examples" / "event-matmul-v2"  # matmul v2 in event mode, an H100
    for a, b in ((gpu, access_run.path), (access_run.path, gpu)):
        c = compare_runs(a, b)
        durations = [r for r in c.rows if "duration" in r.metric.lower()]
        assert durations and all(r.change == NOT_COMPARED for r in durations), durations
        assert any("ran no GPU (access mode)" in n for n in c.notes)


def test_the_devlog_compares_an_access_runs_predictions_and_never_its_time(
    access_run: ProfileResult, tmp_path: Path
) -> None:
    from kbench.report import devlog
    from kbench.report.models import load_result

    twin = _twin(access_run.path, tmp_path / "runs", 1.141)
    devlog.append(access_run, access_run.path, tmp_path / "docs", [])
    _, text = devlog.append(load_result(twin), twin, tmp_path / "docs", [])
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["Interpreter time (CPU, not GPU time)"].endswith("| not compared (CPU time) |")
    (predicted,) = [line for m, line in rows.items() if m.startswith("Predicted time on NVIDIA H100 SXM5 80GB")]
    assert predicted.endswith("| 0.0% faster |") and "n/a" not in predicted
    for name in ("Bytes used per 32-B sector, all lines", "Masked lanes", "Bytes loaded and stored"):
        (line,) = [row for m, row in rows.items() if m.startswith(name)]
        assert line.endswith(("| +0.0% |", "| +0.0 pp |")), line


def test_skills_cpu_example_traces_a_problem_the_interpreter_answers_in_seconds() -> None:
    """issue 50: SKILL.md's access example (matmul v2 --m=8192) took 182 s on a CPU, for the answer a small size gives.
    Counted, not timed: the interpreter runs the model's FLOPs of every program it traces (at most all of them), and
    about 1e9 of them is a second or two of numpy; the 8192 example's model is 2.7e11 (1.7e10 in its 64-program
    sample)."""
    import shlex

    from kbench.plan.discovery import load_version
    from tests.test_skill import loop_commands

    (example,) = [c for c in loop_commands()[3] if "--prof_type=access" in c]
    words = shlex.split(example)
    package, version = words[3], words[4]
    values = dict(w.removeprefix("--").split("=", 1) for w in words[5:] if not w.startswith("--prof_type"))
    plan = load_version(package, version).from_values(values)
    flops = sum(s.flops for s in plan.stages())
    assert flops <= 1e9, (example, f"{flops:.3g} FLOPs")
