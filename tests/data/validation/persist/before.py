"""persist before: one program per row in natural order, 264 rows on a 132-SM H100. Every program fits at once (16
warps: 4 per SM), the GPU places program r and r + 132 on one SM, and SM s runs rows s and s + 132, (s + 1) +
(s + 133) units: 134 on the first SM, 396 on the last, 265 on average. One program alone fills its SM's FP32 pipes,
so each SM's time is its units: the stage lasts 396 units where the work is 265 (0.67 of the SMs' time busy). No
program is defective; the order and grid leave the tail. Fix: a persistent grid pairing long and short rows
(after)."""

from __future__ import annotations

from ._common import ChainRows


class Before(ChainRows):
    """one program per row, row r = program r."""


PLAN = Before
