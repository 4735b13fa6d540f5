"""mla_decode v12: v11 (the seesaw schedule) without its combine kernel where no sequence is cut into more than two
chunks, as v10 is v9's: each chunk of a split row block writes its partial (each warpgroup its half of the columns,
the first its log-sum-exps), the first warpgroup waits for the second's stores, counts the chunk in (an acq_rel
counter per sequence and row block) and, if last, merges the row block's partials into the output. Followed: kbench's
item on v11 at h=128 s=1 b=32, "Fuse stages partial, combine" (annotation mode; the combine took 9.8 us of 89.9)."""

from __future__ import annotations

from typing import ClassVar

from .v11 import MlaDecodeSeesaw


class MlaDecodeSeesawMerged(MlaDecodeSeesaw):
    """v11 with the merge of a split sequence's chunks done by its last chunk, in the one kernel, up to two chunks."""

    MERGE: ClassVar[int] = 2


PLAN = MlaDecodeSeesawMerged
