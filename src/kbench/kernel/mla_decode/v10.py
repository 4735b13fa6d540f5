"""mla_decode v10: v9 without its combine kernel where no sequence is cut into more than two chunks. A split
sequence's chunks still write their partials and log-sum-exps, then each counts itself in (an atomic per sequence
and row block, released after the CTA's stores); the last to arrive merges the row block's partials into the output,
reading them back from L2. Followed: kbench's item on v9 at h=128 s=1, "Fuse stages partial, combine" (est. 23.1% in
event mode). Measured on the H100 with the merge wherever a sequence was split (docs/kernels/mla_decode.md): 96.39 ->
91.52 us at h=128 s=1 b=32 (two chunks a sequence), but 37.49 -> 49.79 us at b=4 s=16 (eight): the last chunk merges
serially what the combine kernel spreads over every SM, hence the bound."""

from __future__ import annotations

from typing import ClassVar

from .v9 import MlaDecodeServe


class MlaDecodeMerged(MlaDecodeServe):
    """v9 with the merge of a split sequence's chunks done by its last chunk, in the one kernel, up to two chunks."""

    MERGE: ClassVar[int] = 2


PLAN = MlaDecodeMerged
