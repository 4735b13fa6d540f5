"""mla_decode v6: v5's fused kernel (TMA tile copies) where its grid fills the GPU, v3's split-KV (partial attention
over cache chunks, then a combine) where it would not: b x row blocks of 64 rows under FUSED_FILL of the SM count
(plain decode, few heads) leaves SMs idle (kbench's Top 1 on v5 at s=1: 32 CTAs on 132 SMs)."""

from __future__ import annotations

import math
from typing import ClassVar

from kbench.plan.base import Config, Launch, Stage

from .v3 import MlaDecodeSplitKV, SplitWorkspace, sm_count
from .v5 import MlaDecodeTma


class MlaDecodeDispatch(MlaDecodeSplitKV):
    """v5 (fused, TMA) when its grid fills the SMs, else v3 (split-KV and a combine)."""

    FUSED_FILL: ClassVar[float] = 0.75  # fused when b x row blocks reach this share of the SMs
    FUSED_ROWS: ClassVar[int] = 64  # the fused kernel's row block at the compute-bound point (v5's fastest tile)

    def fused(self) -> bool:
        """Whether v5's one-kernel grid (b x row blocks of FUSED_ROWS) fills the GPU."""
        return self.b * math.ceil(self.rows / self.FUSED_ROWS) >= self.FUSED_FILL * sm_count()

    def _tma(self) -> MlaDecodeTma:
        return MlaDecodeTma.model_validate(self.model_dump())

    def stages(self) -> list[Stage]:
        if not self.fused():
            return super().stages()
        (stage,) = self._tma().stages()
        return [Stage(stage.name, flops=stage.flops, dram_bytes=stage.dram_bytes, precision=stage.precision,
                      build=self._fused, tuning=stage.tuning, kernels=stage.kernels)]  # fmt: skip

    def _fused(self, ws: SplitWorkspace, cfg: Config) -> Launch:
        return self._tma()._build(ws, cfg)


PLAN = MlaDecodeDispatch
