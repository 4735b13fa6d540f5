"""The profiling session's orchestration on a CPU: the GPU-facing calls are replaced at their boundary
(device detection, preparation, the measurement), the samples are real H100 ones (tests/data/event_h100)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbench.analysis.devices import load_devices, resolve
from kbench.errors import KbenchError, KernelError
from kbench.plan import autotune
from kbench.plan.discovery import load_version
from kbench.runtime import clocks, gpu
from kbench.runtime.prepare import Prepared, PreparedStage
from kbench.runtime.profiling import session
from kbench.runtime.timing import Samples
from tests.clock_fakes import FakeClocks
from tests.conftest import DATA, contract_problems

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
