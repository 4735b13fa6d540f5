"""masked before: a 4096-lane block for a 1000-element row: 3096 of every 4096 lanes masked off on load and store, and
computing the 128 FMAs all the same (4.1x the arithmetic the row needs). Fix: a 1024-lane block (after)."""

from __future__ import annotations

from typing import ClassVar

from ._common import RowMap


class Before(RowMap):
    """a 4096-lane block per 1000-element row."""

    BLOCK: ClassVar[int] = 4096


PLAN = Before
