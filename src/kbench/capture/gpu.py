"""What a run needs to know about the GPU and the software stack (read-only): is there one, which is it, versions."""

from __future__ import annotations

import platform
from typing import Any

from kbench.analysis.devices import ActiveDevice, DeviceTable, load_devices, resolve
from kbench.capture import nvml
from kbench.errors import NoGpuError
from kbench.version import __version__


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def device_count() -> int:
    """How many CUDA GPUs torch sees (0 without any)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def require_cuda(what: str) -> None:
    if not cuda_available():
        raise NoGpuError(
            f"{what} needs a CUDA GPU and none is visible (torch.cuda.is_available() is False); "
            "on a CPU-only machine, `kbench check <kernel>` runs the correctness check under Triton's interpreter"
        )


def tool_versions() -> dict[str, Any]:
    import torch
    import triton

    return {
        "kbench": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_runtime": torch.version.cuda,
        "ncu": None,
        "nsys": None,
    }


def active_device(table: DeviceTable | None = None) -> ActiveDevice:
    """The current CUDA device as NVML names it (NVML's GPU 0 when torch sees no CUDA device)."""
    table = table or load_devices()
    sms: int | None = None
    torch_name: str | None = None
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            sms, torch_name = int(props.multi_processor_count), props.name
    except ImportError:
        pass
    found = nvml.name_and_driver()
    if found:
        return resolve(table, *found, sm_count=sms)
    if torch_name:
        return resolve(table, torch_name, sm_count=sms)
    raise NoGpuError("no NVIDIA GPU found (NVML unavailable and torch sees no CUDA device); name one with --device")
