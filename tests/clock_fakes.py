"""A stand-in for the driver's clock control (kbench.runtime.clocks.ClockControl): records what it is asked to
do, answers reads from a script of readings, and can refuse to lock as a non-root user would be refused."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager

from kbench.analysis.clocks import Reading
from kbench.runtime.clocks import ClockPermission


class FakeClocks:
    def __init__(self, readings: list[Reading] | None = None, *, permitted: bool = True, index: int = 0) -> None:
        self.index = index
        self.permitted = permitted
        self.calls: list[str] = []
        self._readings = itertools.cycle(readings or [Reading(1980, 2619, 0)])

    def read(self) -> Reading:
        return next(self._readings)

    def base_sm_mhz(self) -> int | None:
        return 1590

    def max_mem_mhz(self) -> int | None:
        return 2619

    def lock(self, sm_mhz: int, mem_mhz: int | None) -> bool:
        if not self.permitted:
            raise ClockPermission("NVML nvmlDeviceSetGpuLockedClocks: no permission")
        self.calls.append(f"lock {sm_mhz} {mem_mhz}")
        return True

    def reset(self, mem: bool) -> None:
        if not self.permitted:
            raise ClockPermission("NVML nvmlDeviceResetGpuLockedClocks: no permission")
        self.calls.append(f"reset mem={mem}")

    @contextmanager
    def as_control(self) -> Iterator[FakeClocks]:
        yield self
