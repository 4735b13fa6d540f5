"""mla_decode v15: v12 with the merge in the kernel for sequences cut into up to four chunks (v12: two), so that
the MTP row (s=4: each sequence in four chunks of 16 tiles, 128 CTAs) and the memory-bound rows at t <= 8192 need no
combine kernel. The last chunk of a row block to arrive merges its row block's partials: 64 columns at a time, the
chunks in a loop inside (v9's merge, whose columns were unrolled, spilled under Triton 3.6's ptxas), two chunks'
loads in flight per step. v10 lost with eight chunks (b=4 s=16: 37.5 -> 49.8 us, the last chunk's serial merge of
1 MB); four chunks at MTP read 512 KB, from L2 (written just before by the other chunks).

Measured on the H100 (2026-11-28 00:53 UTC, docs/benchmarks/mla_decode-serving-h100.txt): a step that lost, kept as
measured. Wherever it merges more than two chunks it is slower than v12's combine kernel: MTP 73.11 us against
67.79, t=1024 32.82 against 25.41, t=4096 68.91 against 61.71, t=8192 116.98 against 111.57, b=8 s=16 55.52
against 49.39, h=128 b=16 57.42 against 51.66. The last chunk's merge runs on one SM after the others finished (its
4 warps, 36 bytes of spills a thread in Triton 3.6's ptxas); the combine spreads the same bytes over every SM."""

from __future__ import annotations

from typing import ClassVar

from .v12 import MlaDecodeSeesawMerged


class MlaDecodeSeesawMerged4(MlaDecodeSeesawMerged):
    """v12 with the in-kernel merge up to four chunks a sequence."""

    MERGE: ClassVar[int] = 4


PLAN = MlaDecodeSeesawMerged4
