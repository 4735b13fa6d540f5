"""misalign aligned: x and y start at their buffers' (aligned) beginnings: 16-byte vector loads and stores; the
fixed twin of offset."""

from __future__ import annotations

from typing import ClassVar

from ._common import Scale


class Aligned(Scale):
    """x = xbuf[0:n], y = ybuf[0:n]."""

    OFFSET: ClassVar[int] = 0


PLAN = Aligned
