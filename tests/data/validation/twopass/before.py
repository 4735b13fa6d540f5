"""twopass before: one program of 4 warps per row, two loops of 2048 columns: the sum of squares, then the row
reloaded and scaled. A row is 64 KiB; 12 programs per SM (34 registers a thread, Triton 3.9 for sm_90) hold 1584
rows in flight, about 104 MB read between a chunk's first and second read against the H100's 50 MB L2, so x comes
from DRAM twice: 12 bytes an element moved where the model needs 8. Each pass is a well-formed stream (16-byte
loads, no masked lanes at these sizes). Fix: the row held on chip (after)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import RmsNorm


class Before(RmsNorm):
    """two passes over x."""

    TUNING: ClassVar[list[Config]] = [{"num_warps": 4}]
    CHUNK: ClassVar[int] = 2048


PLAN = Before
