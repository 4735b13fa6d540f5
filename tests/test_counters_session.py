"""The ncu modes' error paths, with a stand-in ncu (a script on KBENCH_NCU) and the GPU checks replaced: every
failure is one clear line and leaves the run folder marked failed."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from kbench import pipeline
from kbench.analysis.devices import load_devices, resolve
from kbench.capture import clocks, gpu, tools
from kbench.errors import KbenchError, KernelError
from kbench.modes.base import RunOptions
from kbench.plan.discovery import load_version
from tests.clock_fakes import FakeClocks

VERSION = "print('NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 36398880)')"


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: Path):
    monkeypatch.setattr(gpu, "require_cuda", lambda what, torch=True: None)
    h100 = resolve(load_devices(), "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(gpu, "active_device", lambda table=None, torch=True: h100)

    def install(body: str) -> None:
        script = tmp_path / "ncu"
        script.write_text(
            f"#!{sys.executable}\nimport sys, time\nif sys.argv[1:] == ['--version']:\n    {VERSION}\n"
            f"    sys.exit(0)\n{body}\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("KBENCH_NCU", str(script))

    return install


def profile(**kw):
    plan = load_version("vector_add").from_values({"n": 1024})
    return pipeline.profile("annotation", plan, RunOptions(out_root=Path("prof"), progress=lambda m: None, **kw))


def failed_run() -> dict[str, Any]:
    (run,) = list(Path("prof/annotation/vector_add").glob("*/*"))
    assert not (run / "report.md").exists() and (run / "ncu.log").exists()
    params: dict[str, Any] = json.loads((run / "params.json").read_text())
    return params


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (
            "print('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission'); sys.exit(1)",
            KbenchError,
            "ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM): run as root",
        ),
        (
            "print('==WARNING== No kernels were profiled.')",
            KbenchError,
            "ncu profiled no kernel: nothing launched inside the NVTX range(s) kbench.add",
        ),
        (
            "print('kbench child: stage add failed: RuntimeError: CUDA error: an illegal memory access'); sys.exit(5)",
            KernelError,
            "the plan failed under ncu: stage add failed: RuntimeError: CUDA error: an illegal memory access",
        ),
        (
            "print('==ERROR== Failed to profile kernel'); sys.exit(1)",
            KbenchError,
            "ncu failed: ==ERROR== Failed to profile kernel",
        ),
    ],
)
def test_ncu_failures_are_one_line_and_marked(fake_ncu, body: str, error: type, message: str) -> None:
    fake_ncu(body)
    with pytest.raises(error) as e:
        profile()
    assert message in str(e.value) and "\n" not in str(e.value)
    params = failed_run()
    assert params["status"] == "failed" and params["tools"]["ncu"] == "2025.3.1.0"
    assert "--clock-control none" in params["ncu_command"] and "kbench.capture.child" in params["ncu_command"]


@pytest.mark.slow
def test_a_hanging_ncu_is_killed(fake_ncu) -> None:
    fake_ncu("time.sleep(60)")
    with pytest.raises(tools.ToolTimeout, match="ran past 1 s"):
        profile(timeout_s=1.0)
    assert failed_run()["status"] == "failed"


def test_missing_ncu_suggests_event_mode(monkeypatch: pytest.MonkeyPatch, isolated: Path, tmp_path: Path) -> None:
    monkeypatch.setattr(gpu, "require_cuda", lambda what, torch=True: None)
    monkeypatch.delenv("KBENCH_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "none"))
    with pytest.raises(tools.ToolMissing, match="--prof_type=event"):
        profile()
    assert not Path("prof").exists()


@pytest.mark.parametrize(
    ("permitted", "lock", "control", "state"),
    [
        (True, True, "none", "locked by kbench at SM 1590 MHz"),  # kbench holds the clocks: ncu must not touch them
        (False, True, "base", "not locked (NVML nvmlDeviceSetGpuLockedClocks: no permission"),  # ncu locks base
        (True, False, "none", "not locked (--no-lock-clocks"),  # the user turned locking off
    ],
)
def test_ncu_clock_control_follows_who_holds_the_clocks(
    fake_ncu, monkeypatch, permitted: bool, lock: bool, control: str, state: str
) -> None:
    fake_ncu("print('==WARNING== No kernels were profiled.')")
    fake = FakeClocks(permitted=permitted)
    monkeypatch.setattr(clocks, "control", fake.as_control)
    with pytest.raises(KbenchError, match="ncu profiled no kernel"):
        profile(lock_clocks=lock)
    params = failed_run()
    assert f"--clock-control {control}" in params["ncu_command"] and params["clocks"].startswith(state)
    assert fake.calls == (["lock 1590 2619", "reset mem=True"] if permitted and lock else [])
