"""wrong partial: writes only the first half of c (the rest keeps the check's NaN poison)."""

from __future__ import annotations

from typing import Any

from kbench.plan.base import Config, Launch

from .base import Wrong


class Partial(Wrong):
    """c[:n/2] = a + b; the second half is never written."""

    def build(self, ws: Any, cfg: Config) -> Launch:
        half = self.n // 2
        return Launch(lambda: ws[2][:half].copy_(ws[0][:half] + ws[1][:half]))


PLAN = Partial
