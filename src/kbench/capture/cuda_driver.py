"""The CUDA device a child process will get, asked of the CUDA driver itself (libcuda through ctypes): its name,
PCI bus id and SM count, with CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER applied as they will be in the child. The
modes that run the plan in a child (annotation, ncu, nsys) use it so that their own process never imports torch
(seconds on a GPU machine); read-only, nothing here changes the device."""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from functools import cache

CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16


@dataclass(frozen=True)
class DriverDevice:
    name: str
    pci: str  # domain:bus:device.function, as NVML takes it
    sms: int


_asking = threading.Lock()  # one thread asks the driver at a time; a second waits for the first's answer


@cache
def library() -> ctypes.CDLL | None:
    """libcuda, loaded once per process; None where there is no CUDA driver."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


@cache
def first_device() -> DriverDevice | None:
    """CUDA device 0 as the driver numbers it for this environment; None without a driver or a visible GPU."""
    with _asking:
        return _ask()


def _ask() -> DriverDevice | None:
    lib = library()
    if lib is None:
        return None
    count, dev, sms = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
    name, pci = ctypes.create_string_buffer(256), ctypes.create_string_buffer(64)
    if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return None
    if (
        lib.cuDeviceGet(ctypes.byref(dev), 0) != 0
        or lib.cuDeviceGetName(name, len(name), dev) != 0
        or lib.cuDeviceGetPCIBusId(pci, len(pci), dev) != 0
        or lib.cuDeviceGetAttribute(ctypes.byref(sms), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != 0
    ):
        return None
    return DriverDevice(name.value.decode(errors="replace"), pci.value.decode(errors="replace"), int(sms.value))


def retain_primary() -> None:
    """Create device 0's primary context (the one torch's runtime uses) and keep a reference to it for the life of
    the process, as torch would once it used the GPU; nothing without a driver or a device."""
    lib = library()
    if lib is None or first_device() is None:
        return
    dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
    if lib.cuDeviceGet(ctypes.byref(dev), 0) == 0:
        lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
