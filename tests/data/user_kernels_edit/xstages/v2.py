"""xstages v2: v1's plan with a kernel of its own, checked against _common.FACTOR."""

from __future__ import annotations

from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config

from ._common import FACTOR
from .v1 import XstagesV1


@triton.jit
def scale_v2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


class XstagesV2(XstagesV1):
    """y = 2x over n float32 elements (v2)."""

    KERNEL: ClassVar[Any] = scale_v2_kernel
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 256, "num_warps": 4, "num_stages": 4}]

    def reference(self, ws: Any) -> Any:
        return ws[0] * FACTOR


PLAN = XstagesV2
