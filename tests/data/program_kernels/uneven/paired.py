"""uneven paired: the fixed twin of triangular, rows i and n-1-i in one program, n + 1 blocks each."""

from __future__ import annotations

from typing import ClassVar

from ._common import PrefixRows


class Paired(PrefixRows):
    """Two rows per program, a long one with a short one."""

    PAIRED: ClassVar[bool] = True


PLAN = Paired
