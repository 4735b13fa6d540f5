"""scalar_atomic wide: 4096-element tiles on 8 warps: 4096 atomics."""

from __future__ import annotations

from ._common import ScalarAtomic


class Wide(ScalarAtomic):
    """4096 elements per atomic."""


PLAN = Wide
