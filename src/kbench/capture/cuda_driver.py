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
def first_device() -> DriverDevice | None:
    """CUDA device 0 as the driver numbers it for this environment; None without a driver or a visible GPU."""
    with _asking:
        return _ask()


def _ask() -> DriverDevice | None:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
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


def warm(context: bool) -> threading.Thread | None:
    """Initialise the CUDA driver (``first_device``) in a daemon thread, and with ``context`` also create device
    0's primary context, while this process imports the plan and torch (1.3-1.4 s on the H100 machine). ctypes
    releases Python's lock around each driver call, so the imports run on; torch then finds the driver initialised
    and takes the same primary context (the one its runtime uses). Under ncu, cuInit is where ncu's injection
    connects: ~0.5 s, then ~0.3 s to create the context, measured between the child's last import and its first
    allocation. Best effort: without a driver nothing is warmed and the run reports what is missing as before."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    thread = threading.Thread(target=_warm, args=(lib, context), name="kbench-cuda-warm", daemon=True)
    thread.start()
    return thread


def _warm(lib: ctypes.CDLL, context: bool) -> None:
    if first_device() is None or not context:
        return
    dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
    # the reference is kept: the context lives as long as the process, as it does once torch uses it
    if lib.cuDeviceGet(ctypes.byref(dev), 0) == 0:
        lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
