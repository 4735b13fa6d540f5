"""faulty bf16_or_fp32: the base plan in bfloat16 by default, float32 allowed (a CPU check runs in float32)."""

from __future__ import annotations

from typing import Literal

from kbench.plan.base import param

from .base import Faulty


class FaultyBf16OrFp32(Faulty):
    """y = 2x in bfloat16 or float32."""

    dtype: Literal["bfloat16", "float32"] = param("bfloat16", help="element type")  # type: ignore[assignment]


PLAN = FaultyBf16OrFp32
