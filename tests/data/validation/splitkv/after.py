"""splitkv after: one program per query streams all its keys and values and writes O; no partials, no combine."""

from __future__ import annotations

from typing import Any, ClassVar

from kbench.plan.base import Config, Launch

from ._common import DecodeAttention


class After(DecodeAttention):
    """one pass per query."""

    KERNELS: ClassVar[list[str]] = ["decode_kernel"]

    def build(self, ws: Any, cfg: Config) -> Launch:
        decode, grid = self.decode(ws, cfg)
        return Launch(decode, grid)


PLAN = After
