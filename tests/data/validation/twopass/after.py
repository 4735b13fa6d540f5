"""twopass after: the whole row (16384 columns) in one block on 16 warps, 32 values a thread: x read once, y written
once. 53 registers a thread (Triton 3.9, sm_90): 2 programs per SM, 128 KiB of loads in flight."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import RmsNorm


class After(RmsNorm):
    """the row on chip."""

    TUNING: ClassVar[list[Config]] = [{"num_warps": 16}]


PLAN = After
