"""rowloop long_narrow (run with --rows=264 --cols=1048576): two CTAs per SM, 4 warps each, 128 columns per iteration,
one 4-byte load per thread in flight: about 1 KiB per SM where DRAM needs several. Fix: 8 warps, 8192 columns per
iteration (long_wide)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import RowLoop


class LongNarrow(RowLoop):
    """BLOCK=128 on 4 warps."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 128, "num_warps": 4}]


PLAN = LongNarrow
