"""splitk serial_combine: the combine is ONE program of one warp looping over all 4096 rows, 16 at a time (256
dependent steps): the GPU runs a single CTA while 131 SMs idle, longer than the partial sums over 128 MiB. Fix: one
program per 16 rows (parallel_combine)."""

from __future__ import annotations

from ._common import SplitRowSum


class SerialCombine(SplitRowSum):
    """one combine program."""


PLAN = SerialCombine
