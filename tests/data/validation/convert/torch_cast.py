"""convert torch_cast: ``x.float()`` before the launch: an aten copy kernel reads x (2 B) and writes an fp32 copy
(4 B) that the kernel then reads again (4 B): 14 bytes an element where 6 are needed. Fix: convert in the kernel's
load (in_kernel)."""

from __future__ import annotations

from typing import ClassVar

from ._common import Convert


class TorchCast(Convert):
    """x.float() first, then the kernel."""

    CAST_FIRST: ClassVar[bool] = True


PLAN = TorchCast
