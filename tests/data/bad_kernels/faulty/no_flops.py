"""faulty no_flops: flops() returns None."""

from __future__ import annotations

from typing import Any

from .base import Faulty


class Broken(Faulty):
    """flops() returns None."""

    def flops(self) -> Any:
        return None


PLAN = Broken
