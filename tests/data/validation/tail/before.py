"""tail before: one CTA per row, 144 CTAs on a 132-SM H100 that holds one per SM: a second wave of 12 CTAs."""

from __future__ import annotations

from ._common import PolySum


class Before(PolySum):
    """grid = rows."""


PLAN = Before
