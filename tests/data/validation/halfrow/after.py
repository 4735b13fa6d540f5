"""halfrow after: the first half of each row loaded, all of it used."""

from __future__ import annotations

from ._common import HalfSum


class After(HalfSum):
    """the half row loaded."""


PLAN = After
