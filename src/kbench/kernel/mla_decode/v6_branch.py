"""mla_decode v6_branch: v6 with its fused kernel's softmax step under a runtime branch that is always taken (issue
44). v5/v6's 64-row block needs two warpgroups for its 64 x 512 fp32 accumulator, and Triton gives a dot that
feeds another dot to all warps along M: both warpgroups compute the whole Q.K^T (1.53x the model's tensor FLOPs,
kbench's "Work repeated by warpgroups"). A user rewriting vLLM's kernel reported that computing P and the rescale
factor under such a branch let Triton split the scores over both warpgroups (226.1 us against v6's 246.9 at
b=32 s=16 t=4096 h=16 on the H100). Measured here (H100, Triton 3.6, 2026-11-27): the branch alone keeps the scores
over warpsPerCTA [8, 1] (still 1.47x) and, on its fastest tile (64 x 32, 3 stages), runs in 443.6 us against v6's
247.8: slower, kept as the step the devlog (docs/kernels/mla_decode.md) records and kbench's items follow. Measured
with the kernel as a function of its own (mla_v6b_fused_kernel, up to commit 2e2f44d); it is now v5's kernel
with its BRANCH switch on, the same code: 442.60 us against v6's 244.07 in that form (benchmark call, 2026-11-27).
v7 (Gluon) splits the scores over the two warpgroups as the branch was meant to."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from .v5 import MlaDecodeTma
from .v6 import MlaDecodeDispatch


class MlaDecodeTmaBranch(MlaDecodeTma):
    """v5's kernel with the softmax step under the runtime branch (its BRANCH switch); v2's tiles and a 128-column
    one (one stage: 144 KB of shared memory): split over the two warpgroups, a 32- or 64-column scores tile would
    become m64n16/n32 wgmmas (kbench's Top 1 on the first run: narrow tensor tiles)."""

    BRANCH: ClassVar[bool] = True
    TILES: ClassVar[list[Config]] = [
        *MlaDecodeTma.TILES,
        {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 1},
    ]


class MlaDecodeDispatchBranch(MlaDecodeDispatch):
    """v6's dispatch with the branch kernel on its fused path (v3's split-KV where the grid would not fill)."""

    def _tma(self) -> MlaDecodeTma:
        return MlaDecodeTmaBranch.model_validate(self.model_dump())


PLAN = MlaDecodeDispatchBranch
