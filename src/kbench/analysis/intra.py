"""Inside one kernel: task records (which CTA, on which SM, which warp, which task, when it started and ended)
turned into the figures an intra-kernel timeline is read for: per task type the distribution of its time across
CTAs, per-SM busy time, load imbalance (slowest CTA over the mean), the SMs' idle tail, and the idle gaps between
tasks. Pure: no GPU.

Records come from kbench's own profiler buffer (``decode``: the words ``kbench.plan.intra`` wrote, one leader per
CTA) or from a Chrome trace: kbench's export (``chrome_trace``) or Proton's instrumentation backend
(``data="trace"``), both with one process ``<kernel> Core<sm> CTA<cta>`` per CTA, thread ``warp <w> ...``, times in
microseconds.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from kbench.analysis.timeline_index import covered
from kbench.errors import KbenchError
from kbench.intra_layout import HEADER, MAGIC, TASK_BITS, TIME_BITS, WRITTEN

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
        parsed = json.loads(text)
    except ValueError as err:
        raise KbenchError(f"{source}: not a readable Chrome trace ({err})") from None
    return trace_records(parsed, source)


def trace_records(parsed: object, source: str = "trace") -> list[Record]:
    """The task records of a Chrome trace already parsed (a dict with ``traceEvents``, or the event list)."""
    events = parsed
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


@dataclass(frozen=True)
class Decoded:
    """What a profiler buffer held: the tasks (start and end paired), and what did not fit or did not pair."""

    records: list[Record]
    ctas: int  # the grid's CTAs, as the kernel wrote them
    recorded_ctas: int  # CTAs whose leader recorded at least once
    slots_per_cta: int  # records a CTA's region holds
    dropped: int  # records made that did not fit (overflow), over all CTAs
    overflowed_ctas: int
    most_records: int  # the records the busiest CTA made (a buffer for every record: ctas x (this + 1) slots)
    unpaired: int  # a start without its end or an end without its start
    step_ns: int  # every timestamp is a multiple of this many ns after the first (the timer's step, at most)


def decode(words: Sequence[int], task_names: Sequence[str]) -> Decoded:
    """The records of a profiler buffer (``kbench.intra_layout``); task type i is ``task_names[i]`` (``task<i>``
    past the list). A KbenchError names what is wrong with a buffer no kernel filled."""
    if len(words) < HEADER or words[0] != MAGIC:
        raise KbenchError("not a kbench profiler buffer (no magic word): allocate it with alloc_profiler_buffer")
    capacity, ctas = int(words[1]), int(words[2])
    if ctas <= 0:
        raise KbenchError(
            "no CTA created a profiler: was the kernel launched with this buffer and ENABLE_PROFILING=True?"
        )
    per = capacity // ctas
    if per < 2:
        raise KbenchError(
            f"the buffer's {capacity} slots give {ctas} CTAs {per} slot(s) each, no room for a record (one slot per "
            f"CTA is its count): give max_num_profile_slots >= {ctas * 2} (records per CTA + 1, times {ctas})"
        )
    mod, half = 1 << TIME_BITS, 1 << (TIME_BITS - 1)
    ref: int | None = None
    raw: list[tuple[int, int, int, int, bool]] = []  # cta, sm, ns (unwrapped against ref), task, start
    recorded = dropped = overflowed = most = 0
    for cta in range(ctas):
        base = HEADER + cta * per
        head = int(words[base])
        if not head & WRITTEN:
            continue
        recorded += 1
        count, sm = head & 0xFFFF_FFFF, (head >> 32) & 0x3FFF_FFFF
        most = max(most, count)
        if count > per - 1:
            dropped += count - (per - 1)
            overflowed += 1
        for w in words[base + 1 : base + 1 + min(count, per - 1)]:
            w = int(w)
            ts = (w >> 16) & (mod - 1)
            ref = ts if ref is None else ref
            ns = (ts - ref + half) % mod - half  # the low bits may have wrapped between two records
            raw.append((cta, sm, ns, (w >> 1) & ((1 << TASK_BITS) - 1), bool(w & 1)))
    if not raw:
        raise KbenchError(f"the buffer holds no records ({ctas} CTAs, none recorded): did the leader record?")
    t0 = min(r[2] for r in raw)
    step = math.gcd(*(r[2] - t0 for r in raw)) or 1

    def name(task: int) -> str:
        return task_names[task] if task < len(task_names) else f"task{task}"

    records, unpaired = [], 0
    open_: dict[tuple[int, int], list[int]] = defaultdict(list)
    for cta, sm, ns, task, start in raw:
        if start:
            open_[(cta, task)].append(ns)
        elif open_[(cta, task)]:
            began = open_[(cta, task)].pop()
            records.append(Record(cta, sm, 0, name(task), (began - t0) / 1e3, (ns - t0) / 1e3))
        else:
            unpaired += 1
    unpaired += sum(len(v) for v in open_.values())
    if not records:
        raise KbenchError(f"{len(raw)} records but no task with both its start and its end: pair every record")
    return Decoded(records, ctas, recorded, per - 1, dropped, overflowed, most, unpaired, step)


def chrome_trace(records: Sequence[Record], kernel: str, meta: dict[str, object]) -> dict[str, object]:
    """A Chrome trace (Perfetto opens it): one process per CTA, ``<kernel> Core<sm> CTA<cta>`` (Proton's naming, so
    ``from_proton_trace`` reads it back), one complete event per task, times in microseconds from the first start;
    ``meta`` goes to ``otherData``."""
    events = [
        {
            "name": r.task,
            "cat": kernel,
            "ph": "X",
            "pid": f"{kernel} Core{r.sm} CTA{r.cta}",
            "tid": f"warp {r.warp} (the CTA's leader)",
            "ts": round(r.start_us, 3),
            "dur": round(r.us, 3),
        }
        for r in sorted(records, key=lambda r: (r.sm, r.cta, r.start_us))
    ]
    return {"displayTimeUnit": "ns", "traceEvents": events, "otherData": meta}


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
    ctas_per_sm: Spread  # how many CTAs each SM ran, one after another or together (as "us" fields)
    tail_idle_pct: float  # SM time after each SM's last task ended, before the kernel's last: share of SMs x span
    unused_sms: int | None = None  # SMs of the device that ran no CTA (None: the device's SM count not given)
    at_once: Spread | None = None  # per SM, the most CTAs it ran at the same time (as "us" fields)
    cta_shared: Spread | None = None  # CTA time of CTAs that shared their SM most of their span
    cta_alone: Spread | None = None  # CTA time of CTAs that had their SM to themselves (90% of their span or more)
    longest: tuple[tuple[int, float], ...] = ()  # the three longest CTAs: (CTA index, its span in us), longest first

    def longest_words(self) -> tuple[str, ...]:
        """The longest CTAs as the catalogue names them ("CTA 12: 41.2 us")."""
        return tuple(f"CTA {c}: {us:.1f} us" for c, us in self.longest)


def analyse(records: list[Record], device_sms: int | None = None) -> IntraAnalysis:
    """The figures of one kernel's records; ``device_sms`` (the GPU's SM count) adds the SMs that ran nothing."""
    start = min(r.start_us for r in records)
    span = max(r.end_us for r in records) - start
    by_cta: dict[int, list[Record]] = defaultdict(list)
    by_warp: dict[tuple[int, int], list[Record]] = defaultdict(list)
    task_warp_us: dict[str, dict[tuple[int, int], float]] = defaultdict(lambda: defaultdict(float))
    for r in records:
        by_cta[r.cta].append(r)
        by_warp[(r.cta, r.warp)].append(r)
        task_warp_us[r.task][(r.cta, r.warp)] += r.us
    # each CTA's first start and last end, and per SM those of the CTAs it ran
    bounds = {c: (min(r.start_us for r in rs), max(r.end_us for r in rs)) for c, rs in by_cta.items()}
    cta_span = {c: b - a for c, (a, b) in bounds.items()}
    sm_intervals: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for c, rs in by_cta.items():
        sm_intervals[rs[0].sm].append(bounds[c])
    per_task: dict[str, list[float]] = {}
    for task in sorted(task_warp_us):  # a CTA's time in a task: its slowest warp's sum
        slowest: dict[int, float] = defaultdict(float)
        for (cta, _), us in task_warp_us[task].items():
            slowest[cta] = max(slowest[cta], us)
        per_task[task] = list(slowest.values())
    events = Counter(r.task for r in records)
    gaps, spans = [], 0.0
    for rs in by_warp.values():
        ordered = sorted(rs, key=lambda r: r.start_us)
        spans += ordered[-1].end_us - ordered[0].start_us
        gaps += [max(0.0, b.start_us - a.end_us) for a, b in itertools.pairwise(ordered)]
    mean_cta = statistics.fmean(cta_span.values())
    at_once, alone, shared = _residency(list(sm_intervals.values()))
    end = start + span
    last_end = [max(b for _, b in iv) for iv in sm_intervals.values()]
    return IntraAnalysis(
        span_us=span,
        ctas=len(by_cta),
        sms=len(sm_intervals),
        tasks={t: Spread.of(v) for t, v in per_task.items()},
        task_events={t: events[t] for t in per_task},
        cta_time=Spread.of(list(cta_span.values())),
        imbalance=max(cta_span.values()) / mean_cta if mean_cta > 0 else 1.0,
        sm_busy_pct=Spread.of([100.0 * covered(iv) / span if span > 0 else 0.0 for iv in sm_intervals.values()]),
        gap_share_pct=100.0 * sum(gaps) / spans if spans > 0 else 0.0,
        gap_us=Spread.of(gaps) if gaps else None,
        ctas_per_sm=Spread.of([float(len(iv)) for iv in sm_intervals.values()]),
        tail_idle_pct=100.0 * sum(end - e for e in last_end) / (len(last_end) * span) if span > 0 else 0.0,
        unused_sms=max(0, device_sms - len(sm_intervals)) if device_sms else None,
        at_once=Spread.of(at_once),
        cta_shared=Spread.of(shared) if shared else None,
        cta_alone=Spread.of(alone) if alone else None,
        longest=tuple(sorted(cta_span.items(), key=lambda kv: -kv[1])[:3]),
    )


def _residency(per_sm: list[list[tuple[float, float]]]) -> tuple[list[float], list[float], list[float]]:
    """From each SM's CTA spans: the most CTAs it held at once; the CTA times of CTAs that shared their SM (over
    10% of their span overlapping another CTA on it) and of those that ran alone there."""
    at_once: list[float] = []
    alone: list[float] = []
    shared: list[float] = []
    for spans in per_sm:
        edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
        now = most = 0
        for _, step in edges:
            now += step
            most = max(most, now)
        at_once.append(float(most))
        for i, (a, b) in enumerate(spans):
            overlap = sum(max(0.0, min(b, y) - max(a, x)) for j, (x, y) in enumerate(spans) if j != i)
            (shared if overlap > 0.1 * (b - a) else alone).append(b - a)
    return at_once, alone, shared
