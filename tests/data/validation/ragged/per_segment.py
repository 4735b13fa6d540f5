"""ragged per_segment: one program per segment; segment 0 holds half of x (2^23 elements at n = 2^24), so one
program of 4 warps streams 32 MiB alone while the 1024 others finish at once: the longest program, not DRAM, sets
the time. Fix: equal chunks (chunked)."""

from __future__ import annotations

from ._common import Ragged


class PerSegment(Ragged):
    """one program per segment."""


PLAN = PerSegment
