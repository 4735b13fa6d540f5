"""fork_join serial: the same three kernels one after another on one stream (the baseline)."""

from kbench.kernel.fork_join._common import ForkJoinPlan


class ForkJoinSerial(ForkJoinPlan):
    """mm, rowsum, combine in order on the caller's stream."""


PLAN = ForkJoinSerial
