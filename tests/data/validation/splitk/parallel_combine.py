"""splitk parallel_combine: one combine program per 16 rows (1024 programs)."""

from __future__ import annotations

from typing import ClassVar

from ._common import SplitRowSum


class ParallelCombine(SplitRowSum):
    """one combine program per 16 rows."""

    ROWS_PER: ClassVar[int] = 16


PLAN = ParallelCombine
