"""splitkv before: split-KV = 4 although one program per query already fills the GPU (1056 queries: 2 waves of 4
programs on each of 132 SMs): 4224 programs each stream a quarter of a query's keys and values and store an
unnormalized fp32 output with its max and sum to the workspace's `partials` and `stats`, then combine_kernel merges
them into O. decode_kernel streams with 16-byte loads and no barrier in its loop, no spills; the distance is the
second kernel, its launch and the partials' round trip (2.2 MB each way), small against K and V (2 x 1.1 GB at the
defaults). Fix: one pass (after)."""

from __future__ import annotations

from typing import Any, ClassVar

from kbench.plan.base import Config, Launch

from ._common import DecodeAttention, combine_kernel


class Before(DecodeAttention):
    """four chunks per query and a combine."""

    SPLITS: ClassVar[int] = 4
    KERNELS: ClassVar[list[str]] = ["decode_kernel", "combine_kernel"]

    def build(self, ws: Any, cfg: Config) -> Launch:
        decode, grid = self.decode(ws, cfg)
        combine = combine_kernel[(self.bh,)]

        def launch() -> None:
            decode()
            combine(ws["partials"], ws["stats"], ws["o"], D=self.d, SPLITS=self.SPLITS, num_warps=1)

        return Launch(launch, grid)


PLAN = Before
