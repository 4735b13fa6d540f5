"""fdiv after: ``acc += x * tl.math.rsqrt(d * d)`` (d > 0): rsqrt.approx.ftz.f32 in the PTX, in SASS per term one
FADD, one FMUL, one MUFU.RSQ and one FFMA (271 SASS instructions in the loop, unrolled to 64 terms, 64 MUFU.RSQ).
The approximate reciprocal that Triton 3.6 and 3.9 both expose and the CPU interpreter runs (libdevice's
fast_dividef does not run there; tl.math.fdiv's approx= is newer than 3.6). One special-function op per term and
nothing else around it: the unit's rate is the ceiling."""

from __future__ import annotations

from typing import ClassVar

from ._common import RatioSum


class After(RatioSum):
    """approximate reciprocal per term."""

    DIV: ClassVar[str] = "rsqrt"


PLAN = After
