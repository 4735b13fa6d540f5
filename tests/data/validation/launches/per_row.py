"""launches per_row: one small launch per row from a Python loop (256 launches of 8 CTAs)."""

from __future__ import annotations

from typing import ClassVar

from ._common import Axpb


class PerRow(Axpb):
    """a launch per row."""

    PER_ROW: ClassVar[bool] = True


PLAN = PerRow
