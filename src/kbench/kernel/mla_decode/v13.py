"""mla_decode v13: v12 (the seesaw schedule, two chunks merged in the kernel) where a sequence is cut into more
chunks, with the combine chained to the attention kernel: one stage that launches the attention kernel and the
combine as its programmatic dependent (PDL: the attention kernel's first warpgroup signals after its loop, so the
combine's grid is launched while the last chunks finish and waits there, griddepcontrol.wait, for their stores), and
the chunks' partial outputs in the output's type (bf16 or fp16: half of v9-v12's fp32 traffic).

The partials: each chunk's normalised output is a convex combination of value rows, so it lies within their range and
rounding it to the output's type adds at most one unit in its last place before the merge (whose weights sum to one)
and the final rounding; the log-sum-exps stay fp32.

What two stages measured: kbench times each stage on its own (the L2 flushed before each, CUDA events around each),
so v9-v12's combine read its partials from DRAM and paid its own launch. One stage times what a decode step runs:
the partials still in L2 where they fit, the combine's launch overlapped."""

from __future__ import annotations

from typing import ClassVar

from .v12 import MlaDecodeSeesawMerged


class MlaDecodeSeesawChained(MlaDecodeSeesawMerged):
    """v12 with the combine chained to the attention kernel (PDL) in one stage, and partials in the output's type."""

    CHAINED: ClassVar[bool] = True


PLAN = MlaDecodeSeesawChained
