"""halfrow before: each row loaded whole, its second half zeroed after the load: 2x the bytes the sum needs from DRAM.
Fix: load the first half only (after)."""

from __future__ import annotations

from typing import ClassVar

from ._common import HalfSum


class Before(HalfSum):
    """the whole row loaded, half of it used."""

    WHOLE: ClassVar[bool] = True


PLAN = Before
