"""rowloop wide: 4 warps per row loop 2048 columns at a time: four 16-byte loads per thread per iteration; the fixed
twin of narrow."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import RowLoop


class Wide(RowLoop):
    """BLOCK=2048 on 4 warps."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 2048, "num_warps": 4}]


PLAN = Wide
