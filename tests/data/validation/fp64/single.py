"""fp64 single: exp(x) * 0.5 + 1 in float32 (tl.exp: ex2.approx; a multiply and an FMA), memory-bound; the fixed
twin of double."""

from __future__ import annotations

from ._common import Expo


class Single(Expo):
    """the arithmetic in float32."""


PLAN = Single
