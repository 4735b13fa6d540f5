"""syncs per_iter: each iteration reduces its 512-column tile to a scalar (tl.sum) before adding it to the running
sum: a cross-warp reduction through shared memory every iteration, two barriers each (32 a row of 8192), so the 4
warps of a CTA keep waiting for each other instead of keeping loads in flight. Fix: a 512-wide accumulator reduced
once after the loop (at_end)."""

from __future__ import annotations

from typing import ClassVar

from ._common import RowSync


class PerIter(RowSync):
    """tl.sum every iteration."""

    PER_ITER: ClassVar[bool] = True


PLAN = PerIter
