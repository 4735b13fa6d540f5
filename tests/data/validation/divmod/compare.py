"""divmod compare: the wrap as ``tl.where(idx >= n, idx - n, idx)`` (t < n)."""

from __future__ import annotations

from ._common import Window


class Compare(Window):
    """the wrap by a compare and a subtraction."""


PLAN = Compare
