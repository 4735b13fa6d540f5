"""mla_decode v2: Triton, fused flash-decoding: one kernel per block of query rows, online softmax over the cache
(scores and probabilities never leave the SM; each program reads its sequence's latent cache once for all its
rows: the s tokens and h heads of one sequence share it)."""

from __future__ import annotations

from typing import ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch, Precision, Stage

from ._common import MlaDecode, Workspace
from ._triton import attend


@triton.jit
def mla_v2_fused_kernel(q_nope_ptr, q_pe_ptr, kv_ptr, o_ptr, scale, s, t, R, H: tl.constexpr,  # type: ignore[no-untyped-def]
                        D: tl.constexpr, P: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    b = tl.program_id(1)  # the row blocks of one sequence are launched together: its cache is read once into L2
    acc, _m, total = attend(q_nope_ptr, q_pe_ptr, kv_ptr, b, rows, 0, t, scale, s, t, R, H, D, P, BLOCK_N)
    out = acc / total[:, None]
    dd = tl.arange(0, D)
    tl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty), mask=rows[:, None] < R)


class MlaDecodeFused(MlaDecode):
    """One Triton kernel: scores, online softmax and P.V fused (flash-decoding)."""

    POW2_WIDTHS: ClassVar[bool] = True
    FP32_AS: ClassVar[Precision] = "tf32"
    # measured on an H100 at b=32 s=16 t=4096 (do_bench, 24 tiles): 64x64 rows x cache rows on 8 warps, 2 stages,
    # fastest (258 us); 32-row tiles on 4 warps spill; 3 stages of 64x64 do not fit in shared memory
    TILES: ClassVar[list[Config]] = [
        {"BLOCK_M": 16, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
        {"BLOCK_M": 16, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
        {"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
        {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 8, "num_stages": 3},
        {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2},
    ]

    def stages(self) -> list[Stage]:
        return [self.attention_stage(self._build, self.row_tiles(self.TILES), ["mla_v2_fused_kernel"])]

    def _build(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.rows, cfg["BLOCK_M"]), self.b)
        kernel, args = mla_v2_fused_kernel[grid], self.kernel_args(cfg)
        return Launch(lambda: kernel(ws.q_nope, ws.q_pe, ws.kv, ws.out, **args), grid)


PLAN = MlaDecodeFused
