"""indexing rows: the fixed twin of flat, one W-row per program, (c, h) once per program."""

from __future__ import annotations

from typing import ClassVar

from ._common import AffineNchw


class Rows(AffineNchw):
    """One row of W per program."""

    ROWS: ClassVar[bool] = True


PLAN = Rows
