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
the partials still in L2 where they fit, the combine's launch overlapped.

Measured on the H100 (2026-11-28; docs/benchmarks/mla_decode-serving-h100.txt, docs/examples/issue52-h100): a step
that lost, kept as measured. Against v12 in the same benchmark run: 45.5 us against 35.6 at b=4 s=16 h=16, 46.3
against 37.8 at h=128 b=8, 76.1 against 68.6 at s=4 (MTP); no worse than noise where nothing is split. Timed as one
(kbench's interleaved timer): the bf16 partials cost 2.2-2.9 us at the split rows (stored from the accumulator's
layout, each instruction fills half of each 32-byte sector: as many sectors as fp32, half used; ncu: the attention
kernel 31.97 us against 28.38), the combine as a programmatic dependent without the trigger saved 1.1-3.1 us, and the
trigger gave 1.1-2.2 us of that back. The benchmark adds v12's two stages, each timed alone, without the gap between
its launches: one stage cannot show that saving against them."""

from __future__ import annotations

from typing import ClassVar

from .v12 import MlaDecodeSeesawMerged


class MlaDecodeSeesawChained(MlaDecodeSeesawMerged):
    """v12 with the combine chained to the attention kernel (PDL) in one stage, and partials in the output's type."""

    CHAINED: ClassVar[bool] = True


PLAN = MlaDecodeSeesawChained
