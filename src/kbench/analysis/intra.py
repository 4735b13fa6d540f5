"""Inside one kernel: task records (which CTA, on which SM, which warp, which task, when it started and ended)
turned into the figures an intra-kernel timeline is read for: per task type the distribution of its time across
CTAs, per-SM busy time, load imbalance (slowest CTA over the mean), and the idle gaps between tasks. Pure: no GPU.

Records come from Proton's instrumentation backend (``data="trace"``: a Chrome trace with one event per scope per
CTA and warp, process ``<kernel> Core<sm> CTA<cta>``, thread ``warp <w> ...``, times in microseconds).
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from kbench.errors import KbenchError

_PID = re.compile(r"Core(?P<sm>\d+)\s+CTA(?P<cta>\d+)")
_TID = re.compile(r"warp\s+(?P<warp>\d+)")


@dataclass(frozen=True)
class Record:
    """One task executed by one warp of one CTA."""

    cta: int
    sm: int
    warp: int
    task: str
    start_us: float
    end_us: float

    @property
    def us(self) -> float:
        return self.end_us - self.start_us


def from_proton_trace(text: str, source: str = "trace") -> list[Record]:
    """The task records of a Proton instrumentation Chrome trace; KbenchError when it holds none."""
    try:
        events = json.loads(text)
    except ValueError as err:
        raise KbenchError(f"{source}: not a readable Chrome trace ({err})") from None
    if isinstance(events, dict):
        events = events.get("traceEvents")
    if not isinstance(events, list):
        raise KbenchError(f"{source}: not a Chrome trace (no traceEvents list)")
    records = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        where, warp = _PID.search(str(e.get("pid", ""))), _TID.search(str(e.get("tid", "")))
        ts, dur = e.get("ts"), e.get("dur")
        if where is None or warp is None or not isinstance(ts, int | float) or not isinstance(dur, int | float):
            continue
        records.append(Record(int(where["cta"]), int(where["sm"]), int(warp["warp"]), str(e.get("name")), ts, ts + dur))
    if not records:
        raise KbenchError(f"{source}: no task events (complete events of a '<kernel> Core<sm> CTA<cta>' process)")
    return records


def load(path: Path) -> list[Record]:
    try:
        return from_proton_trace(path.read_text(), str(path))
    except OSError as e:
        raise KbenchError(f"{path}: cannot read it ({e.strerror})") from None


@dataclass(frozen=True)
class Spread:
    """A distribution across CTAs, in microseconds."""

    n: int
    min_us: float
    median_us: float
    p90_us: float
    max_us: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        return cls(len(ordered), ordered[0], statistics.median(ordered), p90, ordered[-1])


@dataclass(frozen=True)
class IntraAnalysis:
    span_us: float  # first task start to last task end, over the whole kernel
    ctas: int
    sms: int
    tasks: dict[str, Spread]  # per task type: each CTA's time in it (its slowest warp's sum)
    task_events: dict[str, int]
    cta_time: Spread  # each CTA's first start to last end
    imbalance: float  # slowest CTA over the mean CTA
    sm_busy_pct: Spread  # per SM: the union of its CTAs' spans over the kernel's span, in percent (as "us" fields)
    gap_share_pct: float  # time between consecutive tasks of a warp, over the warps' spans
    gap_us: Spread | None  # the gaps themselves (None: no warp ran two tasks)


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def analyse(records: list[Record]) -> IntraAnalysis:
    start = min(r.start_us for r in records)
    span = max(r.end_us for r in records) - start
    by_cta: dict[int, list[Record]] = defaultdict(list)
    by_warp: dict[tuple[int, int], list[Record]] = defaultdict(list)
    for r in records:
        by_cta[r.cta].append(r)
        by_warp[(r.cta, r.warp)].append(r)
    cta_span = {c: max(r.end_us for r in rs) - min(r.start_us for r in rs) for c, rs in by_cta.items()}
    per_task: dict[str, list[float]] = defaultdict(list)
    for task in sorted({r.task for r in records}):
        for rs in by_cta.values():
            warps: dict[int, float] = defaultdict(float)
            for r in rs:
                if r.task == task:
                    warps[r.warp] += r.us
            if warps:
                per_task[task].append(max(warps.values()))
    sm_intervals: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for rs in by_cta.values():
        sm_intervals[rs[0].sm].append((min(r.start_us for r in rs), max(r.end_us for r in rs)))
    gaps, spans = [], 0.0
    for rs in by_warp.values():
        ordered = sorted(rs, key=lambda r: r.start_us)
        spans += ordered[-1].end_us - ordered[0].start_us
        gaps += [max(0.0, b.start_us - a.end_us) for a, b in itertools.pairwise(ordered)]
    mean_cta = statistics.fmean(cta_span.values())
    return IntraAnalysis(
        span_us=span,
        ctas=len(by_cta),
        sms=len(sm_intervals),
        tasks={t: Spread.of(v) for t, v in per_task.items()},
        task_events={t: sum(1 for r in records if r.task == t) for t in per_task},
        cta_time=Spread.of(list(cta_span.values())),
        imbalance=max(cta_span.values()) / mean_cta if mean_cta > 0 else 1.0,
        sm_busy_pct=Spread.of([100.0 * _union(iv) / span if span > 0 else 0.0 for iv in sm_intervals.values()]),
        gap_share_pct=100.0 * sum(gaps) / spans if spans > 0 else 0.0,
        gap_us=Spread.of(gaps) if gaps else None,
    )


def markdown(a: IntraAnalysis) -> str:
    """The intra-kernel section: tasks across CTAs, CTA time and imbalance, SM busy time, gaps."""

    def row(name: str, s: Spread, extra: str = "") -> str:
        return f"| {name} | {s.n} | {s.min_us:.3f} | {s.median_us:.3f} | {s.p90_us:.3f} | {s.max_us:.3f} |{extra}"

    lines = [
        "## Inside the kernel",
        "",
        f"{a.ctas} CTAs on {a.sms} SMs over {a.span_us:.3f} us (first task start to last task end).",
        "",
        "| Task | CTAs | min (us) | median (us) | p90 (us) | max (us) | events |",
        "|---|---|---|---|---|---|---|",
        *[row(t, s, f" {a.task_events[t]} |") for t, s in a.tasks.items()],
        row("(CTA, first start to last end)", a.cta_time, " |"),
        "",
        f"Load imbalance: the slowest CTA took {a.imbalance:.2f}x the mean CTA. SM busy (union of its CTAs' spans "
        f"over the kernel's): median {a.sm_busy_pct.median_us:.1f}%, min {a.sm_busy_pct.min_us:.1f}% over "
        f"{a.sms} SMs. Gaps between a warp's consecutive tasks: {a.gap_share_pct:.1f}% of the warps' spans"
        + (
            f" (median {a.gap_us.median_us:.3f} us, max {a.gap_us.max_us:.3f} us)."
            if a.gap_us is not None
            else " (no warp ran two tasks)."
        ),
    ]
    return "\n".join(lines) + "\n"
