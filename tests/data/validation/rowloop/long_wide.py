"""rowloop long_wide (run with --rows=264 --cols=1048576): the fixed twin of long_narrow, 8192 columns per
iteration on 8 warps (eight 16-byte loads per thread in flight)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import RowLoop


class LongWide(RowLoop):
    """BLOCK=8192 on 8 warps."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 8192, "num_warps": 8}]


PLAN = LongWide
