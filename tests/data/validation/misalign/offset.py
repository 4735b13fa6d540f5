"""misalign offset: x and y start 1 element (2 bytes) into their buffers, so Triton cannot assume 16-byte aligned
pointers and emits 2-byte loads and stores (8 times the memory instructions). Fix: start them at the buffers'
aligned beginnings (aligned)."""

from __future__ import annotations

from typing import ClassVar

from ._common import Scale


class Offset(Scale):
    """x = xbuf[1:n + 1], y = ybuf[1:n + 1]."""

    OFFSET: ClassVar[int] = 1


PLAN = Offset
