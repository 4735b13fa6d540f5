"""mla_decode v15: v12 with the merge in the kernel for sequences cut into up to four chunks (v12: two), so that
the MTP row (s=4: each sequence in four chunks of 16 tiles, 128 CTAs) and the memory-bound rows at t <= 8192 need no
combine kernel. The last chunk of a row block to arrive merges its row block's partials: 64 columns at a time, the
chunks in a loop inside (v9's merge, whose columns were unrolled, spilled under Triton 3.6's ptxas), two chunks'
loads in flight per step. v10 lost with eight chunks (b=4 s=16: 37.5 -> 49.8 us, the last chunk's serial merge of
1 MB); four chunks at MTP read 512 KB, from L2 (written just before by the other chunks)."""

from __future__ import annotations

from typing import ClassVar

from .v12 import MlaDecodeSeesawMerged


class MlaDecodeSeesawMerged4(MlaDecodeSeesawMerged):
    """v12 with the in-kernel merge up to four chunks a sequence."""

    MERGE: ClassVar[int] = 4


PLAN = MlaDecodeSeesawMerged4
