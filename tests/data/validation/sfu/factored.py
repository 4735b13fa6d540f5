"""sfu factored: exp(x) times the sum of exp(-c_j), taken once per program: two exps an element."""

from __future__ import annotations

from typing import ClassVar

from ._common import ExpSum


class Factored(ExpSum):
    """exp(x_i) factored out of the sum."""

    FACTORED: ClassVar[bool] = True


PLAN = Factored
