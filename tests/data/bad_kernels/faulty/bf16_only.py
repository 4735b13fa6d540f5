"""faulty bf16_only: the base plan allowing only bfloat16, which Triton's CPU interpreter cannot compute."""

from __future__ import annotations

from typing import Literal

from kbench.plan.base import param

from .base import Faulty


class FaultyBf16Only(Faulty):
    """y = 2x in bfloat16 only."""

    dtype: Literal["bfloat16"] = param("bfloat16", help="element type")  # type: ignore[assignment]


PLAN = FaultyBf16Only
