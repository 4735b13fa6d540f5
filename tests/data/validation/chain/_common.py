"""What both versions share: mla_decode v2's plan and kernel at d=128, one tile each (no tuning)."""

from __future__ import annotations

from typing import ClassVar

from kbench.kernel.mla_decode.v2 import MlaDecodeFused
from kbench.plan.base import Config, Stage, param


class Chain(MlaDecodeFused):
    """mla_decode v2 at d=128 with one pinned tile."""

    d: int = param(128, help="latent (value) width: the columns of P.V", ge=16, le=1024)
    TILE: ClassVar[Config] = {}

    def stages(self) -> list[Stage]:
        return [self.attention_stage(self._build, [self.TILE], ["mla_v2_fused_kernel"])]
