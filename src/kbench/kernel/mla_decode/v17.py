"""mla_decode v17: v16 where every CTA of the grid can be resident at once, with the chunks of a split row block
merging it together in the attention kernel: no combine kernel, and no serial tail.

v12 merges a row block cut in two in the kernel, the last chunk to arrive reading both partials; v10 (eight chunks)
and v15 (four) lost doing the same with more, the last chunk's merge running on one SM after the others finished
(MTP: 73.1 us against 67.8 with the combine). Here each chunk, once its partial is stored, arrives and polls until
the last to arrive advances the row block's generation; then each merges its own 64-column slices (slice i: chunk i
mod count; 2 of 8 at MTP, each count x 16 KB read from L2, every chunk's loads issued together). Each slice is
claimed by a compare-and-swap of its generation, so it is merged once; the last to arrive also claims whatever its
owner has not (a chunk that gave up polling after COOP_SPINS: its siblings were not resident). Used where the grid
is at most one CTA per SM (v11's CTA holds 224 KB of shared memory: one per SM) and a sequence is cut into at most
sixteen chunks; elsewhere v16's combine.

What it aims at: MTP (b=32 s=4 t=4096 h=16: four chunks a sequence, 128 CTAs), 85% of its roof (51.6 us) needs
60.7 us; v16 takes 69.0 (partials written and read back by a combine kernel of 8.9-9.9 us); here the partials are
read back from L2 by the SMs that wrote them, in parallel."""

from __future__ import annotations

from typing import ClassVar

from .v16 import MlaDecodeSeesawWideCombine


class MlaDecodeSeesawCooperative(MlaDecodeSeesawWideCombine):
    """v16 with a split row block merged by all of its chunks together in the kernel, where they run at once."""

    MERGE: ClassVar[int] = 16
    COOP: ClassVar[bool] = True


PLAN = MlaDecodeSeesawCooperative
