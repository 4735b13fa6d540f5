"""NVML access through a stand-in pynvml module (the library's boundary): read-only, failures become None."""

from __future__ import annotations

import sys
import types

import pytest

from kbench.capture import nvml


class FakeNVMLError(Exception):
    pass


def fake_pynvml(fail_on: str = "") -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    calls: list[str] = []

    def call(name: str, value: object):
        def f(*args: object) -> object:
            calls.append(name)
            if name == fail_on:
                raise FakeNVMLError(name)
            return value

        return f

    nv.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    nv.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    for name, value in [
        ("nvmlInit", None),
        ("nvmlShutdown", None),
        ("nvmlDeviceGetHandleByIndex", "h0"),
        ("nvmlDeviceGetName", b"NVIDIA H100 80GB HBM3"),
        ("nvmlSystemGetDriverVersion", "580.159.04"),
        ("nvmlDeviceGetClockInfo", 1980),
    ]:
        setattr(nv, name, call(name, value))
    nv.calls = calls  # type: ignore[attr-defined]
    return nv


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "_torch_identity", lambda: (None, None))


def test_name_driver_and_clock(monkeypatch: pytest.MonkeyPatch, no_cuda: None) -> None:
    nv = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    assert nvml.name_and_driver() == ("NVIDIA H100 80GB HBM3", "580.159.04")
    assert nv.calls.count("nvmlInit") == nv.calls.count("nvmlShutdown") == 1


@pytest.mark.parametrize("failing", ["nvmlInit", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName"])
def test_any_nvml_failure_is_simply_not_measured(monkeypatch: pytest.MonkeyPatch, no_cuda: None, failing: str) -> None:
    nv = fake_pynvml(fail_on=failing)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    assert nvml.name_and_driver() is None
    if failing != "nvmlInit":  # every successful init is shut down again
        assert nv.calls.count("nvmlInit") == nv.calls.count("nvmlShutdown")
