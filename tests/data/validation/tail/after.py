"""tail after: each row split over 11 CTAs (atomic partial sums): 1584 CTAs, exactly 12 waves of 132."""

from __future__ import annotations

from typing import ClassVar

from ._common import PolySum


class After(PolySum):
    """grid = rows x 11."""

    SPLIT: ClassVar[int] = 11


PLAN = After
