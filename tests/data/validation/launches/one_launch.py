"""launches one_launch: the whole matrix in one launch."""

from __future__ import annotations

from ._common import Axpb


class OneLaunch(Axpb):
    """one launch."""


PLAN = OneLaunch
