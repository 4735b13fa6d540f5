"""uneven triangular: one program per row; program r sums r + 1 blocks, the last 64x the first."""

from __future__ import annotations

from ._common import PrefixRows


class Triangular(PrefixRows):
    """One program per row."""


PLAN = Triangular
