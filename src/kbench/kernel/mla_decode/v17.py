"""mla_decode v17: v16 where every CTA of the grid can be resident at once, with the chunks of a split row block
merging it together in the attention kernel: no combine kernel, and no serial tail.

v12 merges a row block cut in two in the kernel, the last chunk to arrive reading both partials; v10 (eight chunks)
and v15 (four) lost doing the same with more, the last chunk's merge running on one SM after the others finished
(MTP: 73.1 us against 67.8 with the combine). Here each chunk, once its partial is stored, arrives and polls until
the last to arrive advances the row block's generation; then each merges its own 32-column slices (slice i: chunk i
mod count; 4 of 16 at MTP, every chunk's loads of a slice issued together, read from L2). The grid is launched
cooperatively, so that every CTA is resident at once or the launch fails: no chunk can wait for a sibling that never
starts (_coop_merge.py). Used where the grid is at most one CTA per SM (v11's CTA holds 224 KB of shared memory) and a
sequence is cut into at most sixteen chunks; elsewhere v16's combine.

Measured on the H100 (2026-11-28, docs/kernels/mla_decode.md): MTP (b=32 s=4 t=4096 h=16) 67.75 us against v16's
68.75 in the same benchmark run, and one kernel of 71.14 us under ncu against v16's 64.29 + 8.90; the memory-bound
rows and b=4 s=16 1-4% slower than v16 (the benchmark times v16's two kernels one by one, so the gap between them is in
no row). A first cut claimed each slice by a compare-and-swap with acquire-release semantics (so that a chunk whose
siblings never came could leave its slices to the last one) and took 84.61 us under ncu: the last chunk's sixteen
fenced atomics, one after another, in the kernel's tail."""

from __future__ import annotations

from typing import ClassVar

from .v16 import MlaDecodeSeesawWideCombine


class MlaDecodeSeesawCooperative(MlaDecodeSeesawWideCombine):
    """v16 with a split row block merged by all of its chunks together in the kernel, where they run at once."""

    MERGE: ClassVar[int] = 16
    COOP: ClassVar[bool] = True


PLAN = MlaDecodeSeesawCooperative
