"""faulty no_launch: build() returns a function, not a Launch."""

from __future__ import annotations

from typing import Any

from kbench.plan.base import Config

from .base import Faulty


class Broken(Faulty):
    """build() returns a function, not a Launch."""

    def build(self, ws: Any, cfg: Config) -> Any:
        return lambda: None


PLAN = Broken
