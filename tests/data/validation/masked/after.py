"""masked after: a 1024-lane block for a 1000-element row: 24 lanes of 1024 masked off."""

from __future__ import annotations

from ._common import RowMap


class After(RowMap):
    """a 1024-lane block per 1000-element row."""


PLAN = After
