"""fdiv before: ``acc += tl.math.div_rn(x, d)`` in a K=128 loop. Triton's `/` on fp32 emits div.full.f32, so the IEEE
division is asked for by name: div.rn.f32 in the PTX, in SASS per term MUFU.RCP, FCHK, five FFMAs and a branch
around a call to the slow path (Triton 3.9, sm_90, compiled here: 144 SASS instructions in the loop for 8 terms a
thread, 8 MUFU.RCP and 8 FCHK). The special-function unit (16 results per clock per SM) and the division's issue
slots, not DRAM, set the time. Fix: a fast reciprocal (after; full is the `/` in between)."""

from __future__ import annotations

from ._common import RatioSum


class Before(RatioSum):
    """IEEE division per term."""


PLAN = Before
