"""fp64 double: x is converted to float64 and exp(x) * 0.5 + 1 computed there, y converted back to fp32: per element
two fp32<->fp64 conversions, libdevice's exp (14 fp64 FMAs and an add) and one more fp64 FMA, where single issues
ex2.approx, a multiply and an FMA in fp32. An fp32 plan with its arithmetic on the H100's fp64 pipe (half the fp32
rate). Fix: the same in float32 (single)."""

from __future__ import annotations

from typing import ClassVar

from ._common import Expo


class Double(Expo):
    """the arithmetic in float64."""

    F64: ClassVar[bool] = True


PLAN = Double
