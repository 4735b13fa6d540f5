"""stream few: 132 CTAs (one per H100 SM) of one warp, each looping over its share 128 elements (512 bytes) at a
time: each SM has one warp's 512-byte load in flight, far too few bytes to cover DRAM latency. Fix: one
4096-element block per 8-warp CTA, cdiv(n, 4096) CTAs (many)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import Stream

H100_SMS = 132


class Few(Stream):
    """132 one-warp CTAs, grid-stride loop of 128-element blocks."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 128, "num_warps": 1}]
    GRID: ClassVar[int] = H100_SMS


PLAN = Few
