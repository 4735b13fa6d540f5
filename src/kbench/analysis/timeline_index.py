"""The timeline table indexed once, for analyses that ask it many questions (a stage's every range, an iteration's
every window): its columns as lists, the launch calls in time order, the GPU work by correlation id, the union of
GPU work with running sums. Each question then costs a binary search plus the size of its answer, and the analysis
of a timeline O(n log n) in its rows; it was quadratic (every range scanned the table, every occurrence every
kernel, every idle gap every GPU row), and a 2.6 MB trace ran past 200 s. Pure."""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import pandas as pd

GPU_KINDS = ("kernel", "memcpy", "memset")
API_KINDS = ("runtime", "driver")
NO_WORK_YET = "(window start: no GPU work yet)"
N = TypeVar("N", int, float)  # nanoseconds in a timeline, microseconds in a kernel's task records


def union(intervals: Iterable[tuple[N, N]]) -> list[tuple[N, N]]:
    """The intervals merged where they overlap or touch, in order."""
    merged: list[list[N]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def covered(intervals: Iterable[tuple[N, N]]) -> float:
    """How long the intervals cover together (their union's length)."""
    return sum(b - a for a, b in union(intervals))


def known(value: Any) -> bool:
    """A value the table has (None and NaN are missing)."""
    return value is not None and value == value


class Measure:
    """How long a set of intervals covers any stretch of time: their union with running sums of its lengths."""

    def __init__(self, intervals: Iterable[tuple[int, int]]) -> None:
        self.spans = union(intervals)
        self.starts = [a for a, _ in self.spans]
        self.ends = [b for _, b in self.spans]
        self.before = [0, *accumulate(b - a for a, b in self.spans)]  # covered before each span starts

    def upto(self, t: int) -> int:
        """Time covered before ``t``."""
        i = bisect_right(self.starts, t) - 1
        return 0 if i < 0 else self.before[i] + min(t, self.ends[i]) - self.starts[i]

    def within(self, start: int, end: int) -> int:
        return self.upto(end) - self.upto(start) if end > start else 0


class Crowded:
    """How long two or more of a set of intervals ran at once within any stretch: a step function of how many run,
    with running sums of where it is two or more."""

    def __init__(self, intervals: Iterable[tuple[int, int]]) -> None:
        steps: dict[int, int] = {}
        for a, b in intervals:
            if b > a:
                steps[a] = steps.get(a, 0) + 1
                steps[b] = steps.get(b, 0) - 1
        self.times = sorted(steps)
        self.counts = list(accumulate(steps[t] for t in self.times))  # how many run from times[i] to times[i + 1]
        lengths = ((b - a) * (n >= 2) for a, b, n in zip(self.times, self.times[1:], self.counts, strict=False))
        self.before = [0, *accumulate(lengths)]

    def upto(self, t: int) -> int:
        i = bisect_right(self.times, t) - 1
        return 0 if i < 0 else self.before[i] + (t - self.times[i]) * (self.counts[i] >= 2)

    def within(self, start: int, end: int) -> int:
        return self.upto(end) - self.upto(start) if end > start else 0


@dataclass(frozen=True)
class Gap:
    start_ns: int
    gap_us: float
    after: str  # the GPU work that ended last before it


class Index:
    """One timeline table (``analysis.timeline``'s columns) ready for many questions; rows are named by position."""

    def __init__(self, table: pd.DataFrame) -> None:
        self.kind = [str(k) for k in table["kind"]]
        self.name = table["name"].tolist()
        self.stream = table["stream"].tolist()
        self.correlation = table["correlation"].tolist()
        self.start = [int(v) for v in table["start_ns"]]
        self.end = [int(v) for v in table["end_ns"]]
        rows = range(len(self.kind))
        self.gpu = [i for i in rows if self.kind[i] in GPU_KINDS]
        self.kernels = [i for i in self.gpu if self.kind[i] == "kernel"]
        # launch calls by start (stable: the table's order within a start time)
        self.calls = sorted((i for i in rows if self.kind[i] in API_KINDS), key=self.start.__getitem__)
        self.call_starts = [self.start[i] for i in self.calls]
        self.first_call: dict[int, int] = {}  # correlation id -> its first launch call's start
        for i in self.calls:
            if known(c := self.correlation[i]):
                self.first_call.setdefault(int(c), self.start[i])
        self.work_of: dict[Any, list[int]] = {}  # correlation id -> the GPU work it launched, in table order
        for i in self.gpu:
            if known(c := self.correlation[i]):
                self.work_of.setdefault(c, []).append(i)
        self.nvtx: dict[Any, list[tuple[int, int]]] = {}
        for i in rows:
            if self.kind[i] == "nvtx":
                self.nvtx.setdefault(self.name[i], []).append((self.start[i], self.end[i]))
        self.busy = Measure((self.start[i], self.end[i]) for i in self.gpu)
        self.crowded = Crowded((self.start[i], self.end[i]) for i in self.kernels)
        by_end = sorted(self.gpu, key=lambda i: (self.end[i], i))  # the last to end, ties in table order
        self.by_end, self.ends = by_end, [self.end[i] for i in by_end]

    def ranges(self, name: str) -> list[tuple[int, int]]:
        """The occurrences of NVTX range ``name``, in time order."""
        return list(self.nvtx.get(name, []))

    def launched_in(self, start: int, end: int) -> list[int]:
        """The GPU work whose launch call began inside [start, end], in table order."""
        lo, hi = bisect_left(self.call_starts, start), bisect_right(self.call_starts, end)
        ids = {c for i in self.calls[lo:hi] if known(c := self.correlation[i])}
        return sorted(w for c in ids for w in self.work_of.get(c, ()))

    def usage(self, start: int, end: int) -> dict[str, float]:
        """Inside [start, end): time with any GPU work, with two or more kernels at once, and idle."""
        busy = self.busy.within(start, end)
        return {
            "window_us": (end - start) / 1e3,
            "busy_us": busy / 1e3,
            "idle_us": (end - start - busy) / 1e3,
            "concurrent_us": self.crowded.within(start, end) / 1e3,
        }

    def gaps(self, start: int, end: int, top: int) -> list[Gap]:
        """The ``top`` largest stretches inside [start, end) with no GPU work (ties in time order), each with the GPU
        work that ended last before it."""
        found: list[Gap] = []
        reached = start
        spans = self.busy.spans
        for i in range(bisect_right(self.busy.ends, start), len(spans) + 1):
            if reached >= end:
                break
            a, b = spans[i] if i < len(spans) else (end, end)
            if a > reached:
                found.append(Gap(reached, (min(a, end) - reached) / 1e3, self._last_before(start, reached)))
            reached = max(reached, b)
        return heapq.nsmallest(top, found, key=lambda g: -g.gap_us)

    def _last_before(self, start: int, t: int) -> str:
        k = bisect_right(self.ends, t) - 1
        return str(self.name[self.by_end[k]]) if k >= 0 and self.ends[k] > start else NO_WORK_YET

    def alone(self, owners: Sequence[Sequence[int]]) -> list[list[tuple[int, int, int]]]:
        """For each set of kernels (positions): the union of their spans, each span with how long within it some of
        them ran while no other kernel did. One sweep over every kernel's start and end: while k kernels run, a set
        is alone exactly when k of them are its own, and a running kernel's sets are the only candidates."""
        spans = [union((self.start[i], self.end[i]) for i in own) for own in owners]
        starts = [[a for a, _ in merged] for merged in spans]
        alone = [[0] * len(merged) for merged in spans]
        sets_of: dict[int, list[int]] = {}
        for s, own in enumerate(owners):
            for i in own:
                sets_of.setdefault(i, []).append(s)
        events = sorted(
            (t, step, i)
            for i in self.kernels
            if self.end[i] > self.start[i]
            for t, step in ((self.start[i], 1), (self.end[i], -1))
        )
        running_own = [0] * len(owners)
        running: list[tuple[int, int]] = []  # (end, kernel) of the kernels started, ended ones dropped lazily
        count, k = 0, 0
        while k < len(events):
            t = events[k][0]
            while k < len(events) and events[k][0] == t:
                _, step, i = events[k]
                count += step
                for s in sets_of.get(i, ()):
                    running_own[s] += step
                if step > 0:
                    heapq.heappush(running, (self.end[i], i))
                k += 1
            while running and running[0][0] <= t:
                heapq.heappop(running)
            if count and k < len(events):
                for s in sets_of.get(running[0][1], ()):
                    if running_own[s] == count:  # within one span of its union: its own kernels run throughout
                        alone[s][bisect_right(starts[s], t) - 1] += events[k][0] - t
        return [
            [(a, b, n) for (a, b), n in zip(merged, ns, strict=True)] for merged, ns in zip(spans, alone, strict=True)
        ]
