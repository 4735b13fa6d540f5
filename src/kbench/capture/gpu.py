"""What a run needs to know about the GPU and the software stack (read-only): is there one, which is it, versions.

``torch=False``: for a mode whose plan runs in a child process, asked of the CUDA driver and the installed packages
instead of torch, so that this process never imports torch (seconds on a GPU machine); the child imports it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
from pathlib import Path
from typing import Any

from kbench.analysis.devices import ActiveDevice, DeviceTable, load_devices, resolve
from kbench.capture import cuda_driver, nvml
from kbench.errors import NoGpuError
from kbench.version import __version__


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def device_count() -> int:
    """How many CUDA GPUs torch sees (0 without any)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


# what a machine without a GPU can run instead, said wherever GPU work is refused
ON_CPU = (
    "on a CPU-only machine, `kbench check <kernel>` runs the correctness check under Triton's interpreter and "
    "`--prof_type=access` traces every load and store there"
)


def require_cuda(what: str, torch: bool = True) -> None:
    if torch and not cuda_available():
        raise NoGpuError(f"{what} needs a CUDA GPU and none is visible (torch.cuda.is_available() is False); {ON_CPU}")
    if not torch and cuda_driver.first_device() is None:
        raise NoGpuError(f"{what} needs a CUDA GPU and none is visible (the CUDA driver reports none); {ON_CPU}")


def tool_versions(torch: bool = True) -> dict[str, Any]:
    """Versions of the stack; ``torch=False``: the installed packages' versions, read without importing them."""
    if torch:
        import torch as th
        import triton

        found = {"torch": th.__version__, "triton": triton.__version__, "cuda_runtime": th.version.cuda}
    else:
        built = _torch_built()
        found = {
            "torch": built.get("__version__") or _installed("torch"),
            "triton": _installed("triton"),
            "cuda_runtime": built.get("cuda"),
        }
    return {"kbench": __version__, "python": platform.python_version(), **found, "ncu": None, "nsys": None}


def _installed(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_built() -> dict[str, str]:
    """torch's version.py values (``__version__ = '2.11.0+cu130'``, ``cuda = '13.0'``: the local version tag and
    the CUDA runtime it was built with, which the package metadata may lack), read without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {}
    try:
        text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text()
    except OSError:
        return {}
    return dict(re.findall(r"^(__version__|cuda)\b[^=\n]*=\s*['\"]([^'\"]+)['\"]", text, re.M))


def active_device(table: DeviceTable | None = None, torch: bool = True) -> ActiveDevice:
    """The current CUDA device as NVML names it (NVML's GPU 0 when torch sees no CUDA device); ``torch=False``:
    CUDA device 0 as the driver numbers it (the device a child process gets)."""
    table = table or load_devices()
    sms: int | None = None
    torch_name: str | None = None
    if not torch:
        found_driver = cuda_driver.first_device()
        if found_driver is not None:
            sms, torch_name = found_driver.sms, found_driver.name
    else:
        try:
            import torch as th

            if th.cuda.is_available():
                props = th.cuda.get_device_properties(th.cuda.current_device())
                sms, torch_name = int(props.multi_processor_count), props.name
        except ImportError:
            pass
    found = nvml.name_and_driver()
    if found:
        return resolve(table, *found, sm_count=sms)
    if torch_name:
        return resolve(table, torch_name, sm_count=sms)
    raise NoGpuError("no NVIDIA GPU found (NVML unavailable and torch sees no CUDA device); name one with --device")


def target_device(table: DeviceTable, key: str | None) -> ActiveDevice:
    """The device a run on the CPU predicts for: ``key`` (a conf/devices.json key or NVML name), else the GPU this
    machine has, else the table's first entry (an H100 SXM); named as conf/devices.json names it, the one name its
    report gives (no GPU was there to name it otherwise)."""
    from dataclasses import replace

    from kbench.analysis.devices import named_device

    if key is not None:
        device = named_device(table, key)
    elif found := nvml.name_and_driver():
        device = resolve(table, *found)
    else:
        device = named_device(table, next(iter(table.devices)))
    return replace(device, name=device.spec.display_name) if device.spec is not None else device
