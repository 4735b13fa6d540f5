"""fork_join base: the matmul and the row sum on two streams of their own, the combine after both."""

from typing import ClassVar

from kbench.kernel.fork_join._common import ForkJoinPlan


class ForkJoinStreams(ForkJoinPlan):
    """mm on stream 1 and rowsum on stream 2 run concurrently; combine waits for both on the caller's stream."""

    STREAMS: ClassVar[tuple[int, int, int]] = (1, 2, 0)


PLAN = ForkJoinStreams
