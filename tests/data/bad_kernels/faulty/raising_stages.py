"""faulty raising_stages: stages() divides by zero."""

from __future__ import annotations

from typing import Any

from .base import Faulty


class Broken(Faulty):
    """stages() divides by zero."""

    def flops(self) -> Any:
        return self.n / 0


PLAN = Broken
