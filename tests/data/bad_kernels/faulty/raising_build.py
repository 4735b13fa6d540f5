"""faulty raising_build: build() raises."""

from __future__ import annotations

from typing import Any

from kbench.plan.base import Config

from .base import Faulty


class Broken(Faulty):
    """build() raises."""

    def build(self, ws: Any, cfg: Config) -> Any:
        raise RuntimeError("no such kernel")


PLAN = Broken
