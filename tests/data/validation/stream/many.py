"""stream many: cdiv(n, 4096) CTAs of 8 warps, one 4096-element block each (the loop runs once): many CTAs per SM,
each thread with several 16-byte loads in flight; the fixed twin of few."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import Stream


class Many(Stream):
    """one 4096-element block per CTA."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 4096, "num_warps": 8}]


PLAN = Many
