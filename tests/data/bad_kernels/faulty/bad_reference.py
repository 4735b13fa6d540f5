"""faulty bad_reference: reference() returns a float."""

from __future__ import annotations

from typing import Any

from .base import Faulty


class Broken(Faulty):
    """reference() returns a float."""

    def reference(self, ws: Any) -> Any:
        return 0.0


PLAN = Broken
