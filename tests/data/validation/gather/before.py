"""gather before: one program of one warp per bag, one 1 KiB row a step: the row's load waits on its index's load.
The PTX holds one index load (ld.global.b32) and two 16-byte loads a lane per step; ptxas unrolls the loop four
times (SASS, Triton 3.9 for sm_90: four LDG.E, then eight LDG.E.128, then 32 FADDs), so a warp has at most 4 rows
(4 KiB) in flight, after a wait on their indices. 256 bags are about 2 one-warp programs per SM, 8 KiB in flight per
SM: DRAM latency, not its bandwidth, sets the pace. Whole rows, 16-byte loads, no masks: no access defect."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import EmbeddingBag


class Before(EmbeddingBag):
    """a row a step on one warp."""

    TUNING: ClassVar[list[Config]] = [{"num_warps": 1}]


PLAN = Before
