"""mla_decode v16: v12 with a combine that loads every chunk of a row block at once, where a sequence is cut into
more chunks than the kernel merges (small batches, MTP, the memory-bound rows).

v9's combine and v14's walk a sequence's chunks in a loop: each step's loads are waited on before the next step's are
issued, so a CTA takes one DRAM round trip per step (v9: two passes of ``count`` steps, Triton's pipeliner overlapping
a few; v14: one pass over the log-sum-exps, then ``count / 2`` steps). The grid is one partial wave (512 CTAs of 4
warps at b=4 s=16, 0.32 waves): every CTA starts at once, and the kernel lasts as long as one CTA's chain of round
trips. Followed: kbench's item 1 on v12 and on v14 at b=4 s=16 h=16 (annotation, the H100), "Stall on long_scoreboard
in combine ... the line is a use of global or local loads' results ... more independent loads in flight before their
first use (loads of later iterations issued before the arithmetic on earlier ones ...)", est. 8.1% (v12) and 10.1%
(v14). Here the chunks are one axis of the loaded tile: ``CHUNKS`` chunks' log-sum-exps and partials are loaded by one
instruction stream, none waiting on another, and merged with a rescale per group of ``CHUNKS`` (one group wherever a
sequence has at most ``CHUNKS`` chunks).

Measured on the H100 (2026-11-28 02:21-02:26 UTC, docs/benchmarks/mla_decode-serving-h100.txt, docs/examples/
issue52-h100): a small step. Each load instruction of the combine runs once per warp (v12's: 8 times, v14's: 4), and
ncu timed the combine at 9.25 us at b=4 s=16 (8.90 at MTP), against 10.21 for v12's (captured at 00:46, the same
H100). Benchmark against v12 in the same run: b=4 s=16 h=16 34.21 us against 35.71, h=128 b=4 29.63 against 32.53,
b=8 s=16 48.32 against 49.23, t=1024 24.99 against 25.47; MTP 68.98 against 68.72 and t=4096 61.97 against 62.07
(no change). The combine still waits on its loads (84% of its stalls): one round of 16.8 MB from DRAM, a one-wave
kernel's start and drain; what is left of its distance is bytes (fp32 partials) and the launch, not loads in flight."""

from __future__ import annotations

from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config

from .v9 import combine_block
from .v12 import MlaDecodeSeesawMerged


@triton.jit
def mla_v16_combine_kernel(part_ptr, lse_ptr, meta_ptr, o_ptr, R, D: tl.constexpr, BLOCK_M: tl.constexpr,  # type: ignore[no-untyped-def]
                           BLOCK_D: tl.constexpr, CHUNKS: tl.constexpr):  # fmt: skip
    """BLOCK_M rows x BLOCK_D columns of a split sequence: its chunks' partials, CHUNKS at a time, each group's loads
    issued together, merged by their log-sum-exps (a running maximum rescales the groups before)."""
    b, first, count, rows, dd, rmask = combine_block(meta_ptr, R, BLOCK_M, BLOCK_D)
    if count > 1:
        top = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
        weight = tl.zeros((BLOCK_M,), tl.float32)
        for g in range(0, count, CHUNKS):
            new = top
            for c in tl.static_range(CHUNKS):  # the group's maximum
                seen = rmask & (rows * 0 + (g + c) < count)  # a vector: the interpreter masks by no scalar
                new = tl.maximum(new, tl.load(lse_ptr + (first + g + c) * R + rows, mask=seen, other=float("-inf")))
            base = tl.where(new == float("-inf"), 0.0, new)  # rows no chunk saw so far: every weight 0
            scale = tl.exp2(top - base)
            acc = acc * scale[:, None]
            weight = weight * scale
            for c in tl.static_range(CHUNKS):  # no store between: the compiler issues every load first
                seen = rmask & (rows * 0 + (g + c) < count)  # a vector: the interpreter masks by no scalar
                w = tl.exp2(tl.load(lse_ptr + (first + g + c) * R + rows, mask=seen, other=float("-inf")) - base)
                at = part_ptr + ((first + g + c) * R + rows[:, None]) * D + dd[None, :]
                acc += w[:, None] * tl.load(at, mask=seen[:, None], other=0.0)
                weight += w
            top = new
        out = acc / tl.where(weight > 0, weight, 1.0)[:, None]
        tl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty), mask=rmask[:, None])


class MlaDecodeSeesawWideCombine(MlaDecodeSeesawMerged):
    """v12 with a combine that issues every chunk's loads of a row block before it uses any."""

    COMBINE: ClassVar[str] = "mla_v16_combine_kernel"
    COMBINE_TUNING: ClassVar[list[Config]] = [
        {"BLOCK_D": 64, "CHUNKS": 8, "num_warps": 4},
        {"BLOCK_D": 64, "CHUNKS": 4, "num_warps": 4},
        {"BLOCK_D": 128, "CHUNKS": 8, "num_warps": 8},
    ]

    def combine_kernel(self) -> Any:
        return mla_v16_combine_kernel


PLAN = MlaDecodeSeesawWideCombine
