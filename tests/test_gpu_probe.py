"""Modes whose plan runs in a child (annotation, ncu, nsys) learn the GPU and the stack without importing torch in
their own process: the CUDA driver (ctypes) and the installed packages' metadata."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench.capture import gpu

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, sys
from kbench.capture import gpu
from kbench.errors import NoGpuError
out = {"versions": gpu.tool_versions(torch=False)}
try:
    gpu.require_cuda("--prof_type=annotation", torch=False)
    out["device"] = gpu.active_device(torch=False).name
except NoGpuError as e:
    out["error"] = str(e)
out["torch_imported"] = "torch" in sys.modules
print(json.dumps(out))
"""


def _probe(program: str = PROBE) -> dict[str, object]:
    """``program`` in a fresh Python (nothing imported, CUDA untouched); the JSON of its last line."""
    path = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_child_modes_probe_never_imports_torch() -> None:
    import importlib.metadata

    found = _probe()
    assert found["torch_imported"] is False
    versions = found["versions"]
    assert isinstance(versions, dict)
    import torch

    assert versions["torch"] == torch.__version__  # the local tag too (+cpu, +cu130), from torch's version.py
    assert versions["triton"] == importlib.metadata.version("triton")
    if "error" in found:  # no GPU here: the same one line as with torch, naming the driver
        assert "needs a CUDA GPU and none is visible (the CUDA driver reports none)" in str(found["error"])


@pytest.mark.gpu
def test_the_driver_and_torch_name_the_same_device_and_stack() -> None:
    found = _probe()
    assert "error" not in found and found["device"] == gpu.active_device().name
    versions = found["versions"]
    assert isinstance(versions, dict)
    assert versions["cuda_runtime"] == gpu.tool_versions()["cuda_runtime"]
    assert versions["torch"] == gpu.tool_versions()["torch"]


WARM = """
import ctypes, json, sys
from kbench.capture import warmup
thread = warmup.start(context=True)
import torch  # what the warm-up overlaps
thread.join()
lib = ctypes.CDLL("libcuda.so.1")
dev, flags, active, ctx = ctypes.c_int(0), ctypes.c_uint(0), ctypes.c_int(0), ctypes.c_void_p()
lib.cuDeviceGet(ctypes.byref(dev), 0)
lib.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active))
before = {"active": active.value, "torch_initialized": torch.cuda.is_initialized()}
x = torch.ones(4, device="cuda")
torch.cuda.synchronize()
lib.cuCtxGetCurrent(ctypes.byref(ctx))
primary = ctypes.c_void_p()
lib.cuDevicePrimaryCtxRetain(ctypes.byref(primary), dev)
import pynvml  # left initialised by the warm-up: no nvmlInit here, so an uninitialised NVML raises
found = {**before, "sum": float(x.sum()), "torch_uses_primary": ctx.value == primary.value}
print(json.dumps({**found, "nvml_devices": pynvml.nvmlDeviceGetCount() > 0}))
"""


@pytest.mark.gpu
def test_the_warmed_context_is_the_one_torch_then_uses() -> None:
    """warmup.start makes device 0's primary context while torch imports; torch's first kernel runs in it."""
    found = _probe(WARM)
    want = {"active": 1, "torch_initialized": False, "sum": 4.0, "torch_uses_primary": True, "nvml_devices": True}
    assert found == want


def test_without_a_cuda_driver_nothing_is_warmed() -> None:
    import ctypes

    from kbench.capture import warmup

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        assert warmup.start(context=True) is None
    else:
        pytest.skip("this machine has a CUDA driver (the gpu tier tests the warm-up)")
