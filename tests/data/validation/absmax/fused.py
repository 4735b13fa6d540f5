"""absmax fused: |x| taken in the kernel."""

from __future__ import annotations

from ._common import AbsMax


class Fused(AbsMax):
    """|x| inside the kernel."""


PLAN = Fused
