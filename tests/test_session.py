"""The pipeline's orchestration of a live run on a CPU, in event mode: the GPU-facing calls are replaced at their
boundary (tests/pipeline_fakes.py), the samples are real H100 ones (tests/data/event_h100)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kbench import pipeline
from kbench.analysis.clocks import Reading
from kbench.capture import clocks, gpulock
from kbench.errors import KbenchError, KernelError, Terminated
from kbench.modes.base import RunOptions
from kbench.plan.discovery import load_version, with_version
from tests.clock_fakes import FakeClocks
from tests.conftest import DATA, contract_problems
from tests.pipeline_fakes import failing, offline_gpu, replay
from tests.test_clocks import HOLDER

REAL = DATA / "event_h100" / "vector_add_base" / "timings.json"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, isolated: Path) -> Path:
    offline_gpu(monkeypatch)
    replay(monkeypatch, REAL)
    return isolated


def plan():
    return load_version("vector_add").from_values({})


def opts(**kw) -> RunOptions:
    return RunOptions(out_root=Path("prof"), check=False, progress=lambda msg: None, **kw)


def run(monkeypatch: pytest.MonkeyPatch, the_plan=None, **kw):
    replay(monkeypatch, REAL)  # each run replays the same samples
    return pipeline.profile("event", the_plan or plan(), opts(**kw))


def test_a_run_writes_a_complete_folder(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = run(monkeypatch)
    folder = Path(r.out_dir)
    assert contract_problems(folder / "report.md") == []
    assert {p.name for p in folder.iterdir()} == {
        "report.md",
        "params.json",
        "result.json",
        "report.json",
        "timings.json",
        "tiling",
        "compiled",
        "distance.png",  # the stage's distance to its roof, step by step (issue 51)
    }
    params = json.loads((folder / "params.json").read_text())
    assert params["status"] == "ok" and params["device"]["key"] == "H100_SXM"
    assert params["clocks"].startswith(
        "not locked (--no-lock-clocks; kbench left the GPU's clocks alone); SM 1980-1980"
    )
    assert params["clock_samples"]["samples"] >= 2 and params["clock_samples"]["unstable"] is False
    assert (
        json.loads((folder / "timings.json").read_text())["stages"]["add"]["samples_us"]
        == json.loads(REAL.read_text())["stages"]["add"]["samples_us"]
    )
    assert (folder / "compiled" / "add" / "README.txt").exists()  # no Triton kernel was compiled here
    assert r.stage("add").bottleneck == "Memory" and "## vs Baseline" not in r.report_md


def test_the_second_run_compares_whole_plan_medians(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = run(monkeypatch)
    second = run(monkeypatch, with_version(plan(), "v2"))
    baseline = second.sections.baseline
    assert baseline is not None and first.out_dir in baseline.source
    duration = baseline.rows[0]
    assert duration.metric == "Duration (us)" and duration.change == "+0.0% (within noise)"
    assert duration.current == f"{second.plan_timing.median_us:.2f}"
    assert contract_problems(Path(second.out_dir) / "report.md") == []


def test_a_named_baseline_must_match_before_anything_runs(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = run(monkeypatch)
    other = load_version("vector_add").from_values({"n": 1024})
    with pytest.raises(KbenchError, match="a baseline must have the same kernel and parameters"):
        run(monkeypatch, other, baseline=Path(first.out_dir))
    assert not Path("prof/event/vector_add/n1024_float32").exists()
    with pytest.raises(KbenchError, match=r"has no readable result\.json"):
        run(monkeypatch, baseline=Path("nowhere"))


@pytest.mark.parametrize(
    ("error", "status"),
    [(RuntimeError("CUDA error: misaligned address\nmore"), "failed"), (KeyboardInterrupt(), "interrupted")],
)
def test_a_failing_measurement_marks_the_folder(
    offline: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException, status: str
) -> None:
    first = run(monkeypatch)
    failing(monkeypatch, error)
    with pytest.raises(KernelError if status == "failed" else KeyboardInterrupt) as e:
        pipeline.profile("event", plan(), opts())
    if status == "failed":
        assert str(e.value) == "stage (measurement) failed: RuntimeError: CUDA error: misaligned address"
    (failed,) = [p for p in Path(first.out_dir).parent.iterdir() if p.name != Path(first.out_dir).name]
    assert json.loads((failed / "params.json").read_text())["status"] == status
    assert not (failed / "report.md").exists() and (Path(first.out_dir) / "report.md").exists()


def test_locked_clocks_are_reported_and_reset_even_when_terminated(offline: Path, monkeypatch) -> None:
    fake = FakeClocks([Reading(1590, 2619, 0)])
    monkeypatch.setattr(clocks, "control", fake.as_control)
    r = run(monkeypatch, lock_clocks=True)
    assert r.clocks.startswith(
        "locked by kbench at SM 1590 MHz (the driver's default applications clock), memory 2619 MHz; SM 1590-1590 MHz"
    )
    assert "- Clocks: locked by kbench at SM 1590 MHz" in r.report_md and fake.calls == [
        "lock 1590 2619",
        "reset mem=True",
    ]
    params = json.loads((Path(r.out_dir) / "params.json").read_text())
    assert params["clock_samples"]["sm_min_mhz"] == 1590 and params["clock_samples"]["unstable"] is False

    failing(monkeypatch, Terminated("terminated by SIGTERM"))
    with pytest.raises(Terminated):
        pipeline.profile("event", plan(), opts(lock_clocks=True))
    assert fake.calls[-2:] == ["lock 1590 2619", "reset mem=True"] and clocks.read_record(0) is None
    (second,) = [p for p in Path(r.out_dir).parent.iterdir() if p.name != Path(r.out_dir).name]
    params = json.loads((second / "params.json").read_text())
    assert params["status"] == "interrupted" and params["error"] == "interrupted (terminated by SIGTERM)"


def test_an_unstable_clock_is_said_in_the_report(offline: Path, monkeypatch) -> None:
    throttled = [Reading(1980, 2619, 0), Reading(1500, 2619, 0x4)]
    monkeypatch.setattr(clocks, "control", FakeClocks(throttled).as_control)
    r = run(monkeypatch)
    assert r.clock_summary is not None and r.clock_summary.unstable
    line = next(x for x in r.report_md.splitlines() if x.startswith("- Clocks:"))
    assert "power cap active in" in line and "measurement unstable: SM clock moved" in line


@pytest.mark.slow
def test_a_busy_gpu_is_waited_for_or_refused(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "2"], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1]
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(gpulock.GpuBusy, match=f"GPU 0 is busy: kbench pid {holder.pid}"):
        run(monkeypatch, wait=False)
    (refused,) = list(Path("prof/event/vector_add").glob("*/*"))
    assert json.loads((refused / "params.json").read_text())["status"] == "failed"
    said: list[str] = []
    replay(monkeypatch, REAL)
    r = pipeline.profile("event", plan(), RunOptions(out_root=Path("prof"), check=False, progress=said.append))
    assert any(m.startswith(f"GPU 0 is busy: kbench pid {holder.pid}") and "waiting" in m for m in said)
    assert contract_problems(Path(r.out_dir) / "report.md") == []
    holder.communicate(timeout=10)
