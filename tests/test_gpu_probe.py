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


def _probe() -> dict[str, object]:
    path = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
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
