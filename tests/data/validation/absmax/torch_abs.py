"""absmax torch_abs: ``x.abs()`` before the launch: an aten kernel reads x and writes |x| (a 256 MiB temporary at
2^26), which the kernel reads again: 12 bytes an element where 4 are needed. Fix: |x| in the kernel (fused)."""

from __future__ import annotations

from typing import ClassVar

from ._common import AbsMax


class TorchAbs(AbsMax):
    """x.abs() first, then the kernel."""

    ABS_FIRST: ClassVar[bool] = True


PLAN = TorchAbs
