"""mla_decode v7_fa3: v7's Gluon kernel in FlashAttention-3's order (its first cut, issue 44): the next tile's
Q.K^T issued before this tile's P.V, its softmax run while P.V works. With two 72-KB stages the next tile's load
can start only when the previous P.V is done, right before that Q.K^T needs it: on the H100 (Triton 3.6,
2026-11-27) 202.9 us at b=32 s=16 t=4096 h=16 against v7's 161.4 (same run), its warps stalled on that mbarrier
wait (24.8% of the stall samples, ncu). Kept as the measured step the devlog (docs/kernels/mla_decode.md) records
and the before of kbench's pipeline-starvation pair."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from .v7 import MlaDecodeGluon


class MlaDecodeGluonFa3(MlaDecodeGluon):
    """v7 with the loop in FlashAttention-3's order."""

    GLUON_TILES: ClassVar[list[Config]] = [{**MlaDecodeGluon.GLUON_TILES[0], "PV_FIRST": False}]


PLAN = MlaDecodeGluonFa3
