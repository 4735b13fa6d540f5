"""trimm skip: tiles entirely above the diagonal skip the K loop and only store zeros; the diagonal and lower tiles
run the full K loop; the fixed twin of full."""

from __future__ import annotations

from typing import ClassVar

from ._common import TrilMatmul


class Skip(TrilMatmul):
    """tiles above the diagonal store zeros."""

    SKIP: ClassVar[bool] = True


PLAN = Skip
