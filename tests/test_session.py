"""The profiling session's orchestration on a CPU: the GPU-facing calls are replaced at their boundary
(device detection, preparation, the measurement), the samples are real H100 ones (tests/data/event_h100)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kbench.analysis.clocks import Reading
from kbench.analysis.devices import load_devices, resolve
from kbench.capture import clocks, gpu, gpulock
from kbench.capture.prepare import Prepared, PreparedStage
from kbench.capture.timing import Samples
from kbench.errors import KbenchError, KernelError, Terminated
from kbench.plan import autotune
from kbench.plan.discovery import load_version
from kbench.runtime.profiling import session
from tests.clock_fakes import FakeClocks
from tests.conftest import DATA, contract_problems
from tests.test_clocks import HOLDER

REAL = json.loads((DATA / "event_h100" / "vector_add_base" / "timings.json").read_text())


def fake_measure(prep: Prepared, opts: session.RunOptions) -> session.Measurement:
    stage = Samples(REAL["stages"]["add"]["samples_us"], 100, False, 100 << 20)
    plan = Samples(REAL["plan"]["samples_us"], 100, False, 100 << 20)
    return session.Measurement(stages={"add": stage}, plan=plan, method=plan.method)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, isolated: Path) -> Path:
    monkeypatch.setattr(gpu, "require_cuda", lambda what: None)
    monkeypatch.setattr(session, "active_device", lambda table=None: resolve(load_devices(), "NVIDIA H100 80GB HBM3"))
    monkeypatch.setattr(clocks, "control", FakeClocks().as_control)

    def prepare(plan, device, seed):  # the launch does nothing: the fake measure supplies the samples
        prep = Prepared(plan=plan, device="cuda", ws=None)
        for s in plan.checked_stages():
            cfg = dict(s.tuning[0])
            fixed = autotune.TuneResult(best=cfg, history=[], source="fixed", path=None)
            prep.stages.append(PreparedStage(s, cfg, s.build(None, cfg), fixed))
        return prep

    monkeypatch.setattr(session, "prepare_on_gpu", prepare)
    return isolated


def plan():
    return load_version("vector_add").from_values({})


def opts(**kw) -> session.RunOptions:
    return session.RunOptions(out_root=Path("prof"), check=False, progress=lambda msg: None, **kw)


def test_a_run_writes_a_complete_folder(offline: Path) -> None:
    r = session.run("event", fake_measure, plan(), opts())
    run = Path(r.out_dir)
    assert contract_problems(run / "report.md") == []
    assert {p.name for p in run.iterdir()} == {
        "report.md",
        "params.json",
        "result.json",
        "timings.json",
        "tiling",
        "compiled",
    }
    params = json.loads((run / "params.json").read_text())
    assert params["status"] == "ok" and params["device"]["key"] == "H100_SXM"
    assert params["clocks"].startswith(
        "not locked (--no-lock-clocks; kbench left the GPU's clocks alone); SM 1980-1980"
    )
    assert params["clock_samples"]["samples"] >= 2 and params["clock_samples"]["unstable"] is False
    assert (
        json.loads((run / "timings.json").read_text())["stages"]["add"]["samples_us"]
        == REAL["stages"]["add"]["samples_us"]
    )
    assert (run / "compiled" / "add" / "README.txt").exists()  # no Triton kernel was compiled here
    assert r.stage("add").bottleneck == "Memory" and "## vs Baseline" not in r.report_md


def test_the_second_run_compares_whole_plan_medians(offline: Path) -> None:
    first = session.run("event", fake_measure, plan(), opts())
    second = session.run("event", fake_measure, plan().with_version("v2"), opts())
    assert second.baseline_from is not None and first.out_dir in second.baseline_from
    duration = second.baseline[0]
    assert duration.metric == "Duration (us)" and duration.change == "+0.0%"
    assert duration.current == f"{second.plan_timing.median_us:.2f}"  # type: ignore[union-attr]
    assert contract_problems(Path(second.out_dir) / "report.md") == []


def test_a_named_baseline_must_match_before_anything_runs(offline: Path) -> None:
    first = session.run("event", fake_measure, plan(), opts())
    other = load_version("vector_add").from_values({"n": 1024})
    with pytest.raises(KbenchError, match="a baseline must have the same kernel and parameters"):
        session.run("event", fake_measure, other, opts(baseline=Path(first.out_dir)))
    assert not Path("prof/event/vector_add/n1024_float32").exists()
    with pytest.raises(KbenchError, match=r"has no readable result\.json"):
        session.run("event", fake_measure, plan(), opts(baseline=Path("nowhere")))


@pytest.mark.parametrize(
    ("error", "status"),
    [(RuntimeError("CUDA error: misaligned address\nmore"), "failed"), (KeyboardInterrupt(), "interrupted")],
)
def test_a_failing_measurement_marks_the_folder(offline: Path, error: BaseException, status: str) -> None:
    first = session.run("event", fake_measure, plan(), opts())

    def broken(prep: Prepared, o: session.RunOptions) -> session.Measurement:
        raise error

    with pytest.raises(KernelError if status == "failed" else KeyboardInterrupt) as e:
        session.run("event", broken, plan(), opts())
    if status == "failed":
        assert str(e.value) == "stage (measurement) failed: RuntimeError: CUDA error: misaligned address"
    (failed,) = [p for p in Path(first.out_dir).parent.iterdir() if p.name != Path(first.out_dir).name]
    assert json.loads((failed / "params.json").read_text())["status"] == status
    assert not (failed / "report.md").exists() and (Path(first.out_dir) / "report.md").exists()


def test_locked_clocks_are_reported_and_reset_even_when_terminated(offline: Path, monkeypatch) -> None:
    fake = FakeClocks([Reading(1590, 2619, 0)])
    monkeypatch.setattr(clocks, "control", fake.as_control)
    r = session.run("event", fake_measure, plan(), opts(lock_clocks=True))
    assert r.clocks.startswith(
        "locked by kbench at SM 1590 MHz (the driver's default applications clock), memory 2619 MHz; SM 1590-1590 MHz"
    )
    assert "- Clocks: locked by kbench at SM 1590 MHz" in r.report_md and fake.calls == [
        "lock 1590 2619",
        "reset mem=True",
    ]
    params = json.loads((Path(r.out_dir) / "params.json").read_text())
    assert params["clock_samples"]["sm_min_mhz"] == 1590 and params["clock_samples"]["unstable"] is False

    def terminated(prep: Prepared, o: session.RunOptions) -> session.Measurement:
        raise Terminated("terminated by SIGTERM")

    with pytest.raises(Terminated):
        session.run("event", terminated, plan(), opts(lock_clocks=True))
    assert fake.calls[-2:] == ["lock 1590 2619", "reset mem=True"] and clocks.read_record(0) is None
    (second,) = [p for p in Path(r.out_dir).parent.iterdir() if p.name != Path(r.out_dir).name]
    params = json.loads((second / "params.json").read_text())
    assert params["status"] == "interrupted" and params["error"] == "interrupted (terminated by SIGTERM)"


def test_an_unstable_clock_is_said_in_the_report(offline: Path, monkeypatch) -> None:
    throttled = [Reading(1980, 2619, 0), Reading(1500, 2619, 0x4)]
    monkeypatch.setattr(clocks, "control", FakeClocks(throttled).as_control)
    r = session.run("event", fake_measure, plan(), opts())
    assert r.clock_summary is not None and r.clock_summary.unstable
    line = next(x for x in r.report_md.splitlines() if x.startswith("- Clocks:"))
    assert "power cap active in" in line and "measurement unstable: SM clock moved" in line


def test_a_busy_gpu_is_waited_for_or_refused(offline: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "2"], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1]
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(gpulock.GpuBusy, match=f"GPU 0 is busy: kbench pid {holder.pid}"):
        session.run("event", fake_measure, plan(), opts(wait=False))
    (refused,) = list(Path("prof/event/vector_add").glob("*/*"))
    assert json.loads((refused / "params.json").read_text())["status"] == "failed"
    said: list[str] = []
    r = session.run(
        "event", fake_measure, plan(), session.RunOptions(out_root=Path("prof"), check=False, progress=said.append)
    )
    assert any(m.startswith(f"GPU 0 is busy: kbench pid {holder.pid}") and "waiting" in m for m in said)
    assert contract_problems(Path(r.out_dir) / "report.md") == []
    holder.communicate(timeout=10)
