"""Read-only NVML access (nvidia-ml-py) for the GPU torch is using. Nothing here changes the device."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _torch_identity() -> tuple[str | None, str | None]:
    """(PCI bus id, UUID) of torch's current CUDA device, where torch exposes them; in a process that has not
    imported torch (a mode whose plan runs in a child), CUDA device 0 as the driver numbers it."""
    if "torch" not in sys.modules:
        from kbench.capture import cuda_driver

        found = cuda_driver.first_device()
        return (found.pci if found else None), None
    try:
        import torch

        if not torch.cuda.is_available():
            return None, None
        props: Any = torch.cuda.get_device_properties(torch.cuda.current_device())
    except Exception:  # no usable CUDA runtime: identify nothing
        return None, None
    pci = None
    if all(hasattr(props, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        pci = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    uuid = getattr(props, "uuid", None)
    return pci, (str(uuid) if uuid else None)


def _handle(nv: Any) -> Any:
    """NVML's handle for torch's current device (else GPU 0), or None when NVML cannot give one."""
    pci, uuid = _torch_identity()
    try:
        if pci:
            return nv.nvmlDeviceGetHandleByPciBusId(pci.encode())
        if uuid:
            return nv.nvmlDeviceGetHandleByUUID(("GPU-" + uuid.removeprefix("GPU-")).encode())
    except nv.NVMLError:
        pass
    try:
        return nv.nvmlDeviceGetHandleByIndex(0)
    except nv.NVMLError:
        return None


def hold() -> None:
    """Initialise NVML and leave it initialised for the life of the process: NVML counts its initialisations, so
    every later ``current_gpu`` (its own init and shutdown) is then cheap instead of ~0.25 s on the H100 machine.
    Nothing without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # library missing or no driver: current_gpu says so when asked
        return


@contextmanager
def current_gpu() -> Iterator[tuple[Any, Any] | None]:
    """Yield (pynvml module, handle) for torch's current device (else NVML's GPU 0), or None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # library missing or no driver: NVML cannot tell anything
        yield None
        return
    try:
        handle = _handle(pynvml)
        yield None if handle is None else (pynvml, handle)
    finally:
        pynvml.nvmlShutdown()


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def name_and_driver() -> tuple[str, str] | None:
    with current_gpu() as gpu:
        if gpu is None:
            return None
        nv, handle = gpu
        try:
            return text(nv.nvmlDeviceGetName(handle)), text(nv.nvmlSystemGetDriverVersion())
        except nv.NVMLError:
            return None
