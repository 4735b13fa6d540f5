"""syncs at_end: each iteration adds its 512-column tile to a 512-wide accumulator held in registers (no barrier in
the loop), reduced to the row's sum once after it; the fixed twin of per_iter."""

from __future__ import annotations

from ._common import RowSync


class AtEnd(RowSync):
    """tl.sum once, after the loop."""


PLAN = AtEnd
