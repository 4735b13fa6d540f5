"""indexing flat: (c, h, w) from each element's flat index by 64-bit division and modulo."""

from __future__ import annotations

from ._common import AffineNchw


class Flat(AffineNchw):
    """BLOCK=1024 flat elements per program."""


PLAN = Flat
