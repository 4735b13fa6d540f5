"""mla_decode v10: v9 without its combine kernel. A split sequence's chunks still write their partials and
log-sum-exps, then each counts itself in (an atomic per sequence and row block, released after the CTA's stores);
the last to arrive merges the row block's partials into the output, reading them back from L2. Followed: kbench's
item on v9 at h=128 s=1, "Fuse stages partial, combine" (est. 23.1% in event mode, docs/kernels/mla_decode.md)."""

from __future__ import annotations

from typing import ClassVar

from .v9 import MlaDecodeServe


class MlaDecodeMerged(MlaDecodeServe):
    """v9 with the merge of a split sequence's chunks done by its last chunk, in the one kernel."""

    MERGE: ClassVar[bool] = True


PLAN = MlaDecodeMerged
