"""divmod modulo: ``idx % n`` on every one of the 32 taps, n a runtime value (not a power of two): an integer
division sequence (about 20 instructions) per tap and element, against one add and one load: the SM's instruction
issue, not DRAM, sets the time. Fix: wrap with a compare and a subtraction (compare)."""

from __future__ import annotations

from typing import ClassVar

from ._common import Window


class Modulo(Window):
    """the wrap by %."""

    WRAP_BY_MOD: ClassVar[bool] = True


PLAN = Modulo
