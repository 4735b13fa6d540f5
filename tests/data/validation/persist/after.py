"""persist after: a persistent grid of one program per SM (the SM count read from torch at build time), program p
taking rows p and n - 1 - p (then p + P and n - 1 - p - P, ...): at 264 rows on 132 SMs every program runs n + 1 =
265 units, and so does every SM."""

from __future__ import annotations

from typing import ClassVar

from ._common import ChainRows


class After(ChainRows):
    """persistent, rows paired long with short."""

    PERSISTENT: ClassVar[bool] = True


PLAN = After
