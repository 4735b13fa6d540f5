"""A plan's timeline, stage by stage: what each stage's NVTX ranges launched, how its kernels overlapped, where
the GPU sat idle, how long launches took to start, the order stages ran in, and (for a concurrent plan) the
overlap achieved against the ideal. Pure: the normalized timeline table (``analysis.timeline``) in, models out.

kbench's captures mark each iteration of the whole plan with the NVTX range ``kbench:iteration`` and, inside
it, each stage with ``kbench.<stage>``; a concurrent plan's stages are also run one at a time in
``kbench:alone:<stage>``. A capture made elsewhere is read as far as it goes: ``kbench.*`` ranges become the
stages (each occurrence an iteration), and without any range each kernel name is a stage.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from pydantic import Field

from kbench.analysis.timeline_index import Index, known
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import KbenchError
from kbench.model import Model
from kbench.nvtx import ITERATION, STAGE, alone_range, stage_range

if TYPE_CHECKING:  # pandas is imported where a frame is built: analysis without a timeline never loads it
    import pandas as pd

TOP_GAPS = 5


@dataclass(frozen=True)
class StageSpec:
    """What the plan declares about a stage's place in the timeline."""

    name: str
    stream: int = 0
    after: tuple[str, ...] = ()


class Occurrence(Model):
    """One run of one stage: its range (CPU side) and the GPU work launched inside it."""

    stage: str
    phase: str  # "together" (inside an iteration of the whole plan) or "alone"
    iteration: int
    range_start_ns: int | None
    range_us: float | None
    gpu_start_ns: int
    gpu_end_ns: int
    gpu_us: float  # first start to last end of the work it launched
    kernel_us: float  # kernels' own durations, summed
    kernels: list[str]
    streams: list[int]
    launch_latency_us: float | None  # first kernel: launch call start to kernel start
    overlapped_pct: float  # share of its kernel time during which a kernel of other work also ran
    rows: list[int] = Field(default=[], exclude=True)  # its kernels' positions in the timeline table


class StageTimeline(Model):
    stage: str
    streams: list[int]
    kernels: list[str]
    occurrences: int
    range_us: float | None
    gpu: TimingStats
    kernel_us: float
    alone: TimingStats | None
    overlapped_pct: float
    launch_latency_us: float | None
    launch_latency_max_us: float | None


class Window(Model):
    """One analysed stretch of the timeline: an iteration of the plan (or the whole capture)."""

    index: int
    start_ns: int
    window_us: float  # iteration range start to the end of the last GPU work it launched
    span_us: float  # first to last GPU work it launched
    busy_us: float
    idle_us: float
    concurrent_us: float  # two or more kernels at once


class Gap(Model):
    window: int
    at_us: float  # from the window's start
    gap_us: float
    after: str


class LaunchOrder(Model):
    declared: list[str]
    api: list[tuple[str, int]]  # each launch-call order seen, with how many iterations
    gpu: list[tuple[str, int]]  # each GPU start order seen
    dependency_checks: int
    dependency_violations: int


class OverlapVsIdeal(Model):
    """A concurrent plan: each stage alone against all of them together."""

    streams: int
    sequential_us: float  # the stages' alone medians summed
    ideal_us: float  # the critical path through the declared streams and dependencies, from alone medians
    together_us: float  # median span of an iteration
    achieved_pct: float | None  # (sequential - together) / (sequential - ideal)
    speedup: float  # sequential / together


class TimelineAnalysis(Model):
    backend: str
    source: str
    grouping: str  # how stages were found
    stages: list[StageTimeline]
    windows: list[Window]
    gaps: list[Gap]
    order: LaunchOrder | None
    overlap: OverlapVsIdeal | None
    occurrences: list[Occurrence] = Field(default=[], exclude=True)  # every run of every stage (occurrences.csv)

    @property
    def window_us(self) -> float:
        return statistics.median(w.window_us for w in self.windows)

    @property
    def span_us(self) -> TimingStats:
        return TimingStats.of([w.span_us for w in self.windows])

    @property
    def idle_pct(self) -> float:
        return statistics.median(100.0 * w.idle_us / w.window_us if w.window_us else 0.0 for w in self.windows)

    def median(self, field: str) -> float:
        return statistics.median(float(getattr(w, field)) for w in self.windows)

    def stage(self, name: str) -> StageTimeline:
        return next(s for s in self.stages if s.stage == name)


def backend_of(path_suffix: str) -> str:
    return "Nsight Systems" if path_suffix == ".sqlite" else "PyTorch profiler (CUPTI)"


@dataclass(frozen=True)
class _Run:
    """One run of a stage before its overlap is known: the GPU work (table positions) its range launched."""

    stage: str
    phase: str
    iteration: int
    rng: tuple[int, int] | None
    work: list[int]


def _occurrence(idx: Index, run: _Run, spans: list[tuple[int, int, int]]) -> Occurrence:
    """``spans``: the union of its kernels' spans, each with how long only its own kernels ran (``Index.alone``)."""
    own = [i for i in run.work if idx.kind[i] == "kernel"]  # in table order: by start, ties as captured
    start, end = min(idx.start[i] for i in run.work), max(idx.end[i] for i in run.work)
    busy = sum(b - a for a, b, _ in spans)
    # summed span by span as a share of each, as the quadratic version did: the same figures to the last bit
    covered = sum(((b - a - alone) / (b - a) if b > a else 0.0) * (b - a) for a, b, alone in spans)
    latency = None
    if own and known(c := idx.correlation[own[0]]):
        call = idx.first_call.get(int(c))
        latency = (idx.start[own[0]] - call) / 1e3 if call is not None else None
    rng = run.rng
    return Occurrence(
        stage=run.stage,
        phase=run.phase,
        iteration=run.iteration,
        range_start_ns=rng[0] if rng else None,
        range_us=(rng[1] - rng[0]) / 1e3 if rng else None,
        gpu_start_ns=start,
        gpu_end_ns=end,
        gpu_us=(end - start) / 1e3,
        kernel_us=float(sum(idx.end[i] - idx.start[i] for i in own)) / 1e3,
        kernels=[str(idx.name[i]) for i in own],
        streams=sorted({int(s) for i in own if known(s := idx.stream[i])}),
        launch_latency_us=latency,
        overlapped_pct=100.0 * covered / busy if busy else 0.0,
        rows=own,
    )


def _inside(point: int, starts: Sequence[int], reach: Sequence[int]) -> int | None:
    """The first of some ranges holding ``point``: ``starts`` their starts (sorted), ``reach`` the running maximum of
    their ends."""
    first = bisect_left(reach, point)  # the first range ending at or after the point
    return first if first < bisect_right(starts, point) else None


def occurrences(
    table: pd.DataFrame, stages: Sequence[str] | None = None, idx: Index | None = None
) -> tuple[list[Occurrence], str]:
    """Every run of every stage, and how the stages were found. ``stages``: the plan's stage names (their
    ranges must be in the capture), or None to take whatever the capture marks."""
    idx = idx or Index(table)
    iterations = idx.ranges(ITERATION)
    starts, reach = [a for a, _ in iterations], list(accumulate((b for _, b in iterations), max))
    marked = [str(n) for n in dict.fromkeys(idx.nvtx) if str(n).startswith(STAGE)]
    names = list(stages) if stages is not None else [n[len(STAGE) :] for n in marked]
    runs: list[_Run] = []
    if names:
        for name in names:
            for phase, ranges in (
                ("together", idx.ranges(stage_range(name))),
                ("alone", idx.ranges(alone_range(name))),
            ):
                for k, (a, b) in enumerate(ranges):
                    it = _inside(a, starts, reach) if phase == "together" and iterations else k
                    if it is None:
                        continue  # a stage range outside every iteration: not part of a timed run of the plan
                    if work := idx.launched_in(a, b):
                        runs.append(_Run(name, phase, it, (a, b), work))
        found = {r.stage for r in runs if r.phase == "together"}
        missing = [n for n in names if n not in found]
        if missing:
            raise KbenchError(
                f"no GPU work was launched inside NVTX range(s) {', '.join(stage_range(n) for n in missing)}: the "
                "capture is of another program, or its launches were not traced (nsys -t cuda,nvtx)"
            )
        how = "NVTX ranges kbench.<stage>" + (f" inside {ITERATION}" if iterations else "")
    else:  # no kbench ranges at all: every kernel name is a stage, every launch of it an iteration
        seen: Counter[str] = Counter()
        for i in idx.kernels:
            name = str(idx.name[i])
            runs.append(_Run(name, "together", seen[name], None, [i]))
            seen[name] += 1
        how = "kernel names (the capture has no kbench.* NVTX ranges)"
    alone = idx.alone([[i for i in r.work if idx.kind[i] == "kernel"] for r in runs])
    return [_occurrence(idx, r, spans) for r, spans in zip(runs, alone, strict=True)], how


def windows(
    table: pd.DataFrame, occs: Sequence[Occurrence], idx: Index | None = None
) -> tuple[list[Window], list[Gap]]:
    """The iterations of the plan (or one window over everything the stages launched), with busy, idle and
    concurrent time and the largest idle gaps of all of them."""
    idx = idx or Index(table)
    together = [o for o in occs if o.phase == "together"]
    spans: list[tuple[int, int, int, int, int]] = []  # index, window start, first GPU start, last GPU end, window end
    iterations = idx.ranges(ITERATION)
    if iterations:
        per: dict[int, list[Occurrence]] = {}
        for o in together:
            per.setdefault(o.iteration, []).append(o)
        for i, (a, b) in enumerate(iterations):
            if mine := per.get(i):
                g0, g1 = min(o.gpu_start_ns for o in mine), max(o.gpu_end_ns for o in mine)
                spans.append((i, a, g0, g1, max(g1, b)))
    else:
        starts = [o.range_start_ns if o.range_start_ns is not None else o.gpu_start_ns for o in together]
        g0, g1 = min(o.gpu_start_ns for o in together), max(o.gpu_end_ns for o in together)
        spans.append((0, min(starts), g0, g1, g1))
    out, gaps = [], []
    for i, w0, g0, g1, w1 in spans:
        use = idx.usage(w0, w1)
        out.append(
            Window(
                index=i,
                start_ns=w0,
                window_us=use["window_us"],
                span_us=(g1 - g0) / 1e3,
                busy_us=use["busy_us"],
                idle_us=use["idle_us"],
                concurrent_us=use["concurrent_us"],
            )
        )
        gaps += [
            Gap(window=i, at_us=(g.start_ns - w0) / 1e3, gap_us=g.gap_us, after=g.after)
            for g in idx.gaps(w0, w1, TOP_GAPS)
        ]
    gaps.sort(key=lambda g: g.gap_us, reverse=True)
    return out, gaps[:TOP_GAPS]


def _orders(occs: Sequence[Occurrence], key: str) -> list[tuple[str, int]]:
    per: dict[int, list[Occurrence]] = {}
    for o in occs:
        per.setdefault(o.iteration, []).append(o)
    seen = Counter(", ".join(o.stage for o in sorted(v, key=lambda o: getattr(o, key) or 0)) for v in per.values())
    return seen.most_common()


def launch_order(occs: Sequence[Occurrence], specs: Sequence[StageSpec]) -> LaunchOrder:
    """Per iteration: the order of the stages' launch calls and of their first kernels on the GPU, and whether
    every stage started only after the stages it declares it runs after had finished."""
    together = [o for o in occs if o.phase == "together"]
    by_it: dict[int, dict[str, Occurrence]] = {}
    for o in together:
        by_it.setdefault(o.iteration, {})[o.stage] = o
    checks = violations = 0
    for stages in by_it.values():
        for spec in specs:
            me = stages.get(spec.name)
            for dep in spec.after:
                if me is None or dep not in stages:
                    continue
                checks += 1
                violations += me.gpu_start_ns < stages[dep].gpu_end_ns
    return LaunchOrder(
        declared=[s.name for s in specs],
        api=_orders(together, "range_start_ns"),
        gpu=_orders(together, "gpu_start_ns"),
        dependency_checks=checks,
        dependency_violations=violations,
    )


def critical_path_us(specs: Sequence[StageSpec], alone_us: dict[str, float]) -> float:
    """The plan's shortest possible time if stages on different streams overlapped perfectly: each stage starts
    when the stages it runs after and the previous stage on its stream have finished."""
    finish: dict[str, float] = {}
    last_on: dict[int, float] = {}
    for s in specs:
        ready = max([last_on.get(s.stream, 0.0), *(finish[d] for d in s.after if d in finish)])
        finish[s.name] = ready + alone_us[s.name]
        last_on[s.stream] = finish[s.name]
    return max(finish.values(), default=0.0)


def overlap_vs_ideal(
    specs: Sequence[StageSpec], stages: Sequence[StageTimeline], together_us: float
) -> OverlapVsIdeal | None:
    alone = {s.stage: s.alone.median_us for s in stages if s.alone is not None}
    if len({s.stream for s in specs}) < 2 or any(s.name not in alone for s in specs):
        return None
    sequential = sum(alone.values())
    ideal = critical_path_us(specs, alone)
    achieved = 100.0 * (sequential - together_us) / (sequential - ideal) if sequential > ideal else None
    return OverlapVsIdeal(
        streams=len({s.stream for s in specs}),
        sequential_us=sequential,
        ideal_us=ideal,
        together_us=together_us,
        achieved_pct=achieved,
        speedup=sequential / together_us if together_us else 0.0,
    )


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def analyze(
    table: pd.DataFrame, backend: str, source: str, specs: Sequence[StageSpec] | None = None
) -> TimelineAnalysis:
    """Everything the nsys report shows, from one timeline table. ``specs``: the plan's stages in declared order
    (None: the stages are whatever the capture marks)."""
    idx = Index(table)
    occs, how = occurrences(table, [s.name for s in specs] if specs is not None else None, idx)
    if not occs:
        raise KbenchError(f"{source} holds no GPU work to analyse")
    runs: dict[str, dict[str, list[Occurrence]]] = {}  # stage -> phase -> its runs
    for o in occs:
        runs.setdefault(o.stage, {}).setdefault(o.phase, []).append(o)
    names = list(runs)
    stages = []
    for name in names:
        mine = runs[name].get("together", [])
        alone = [o.gpu_us for o in runs[name].get("alone", [])]
        stages.append(
            StageTimeline(
                stage=name,
                streams=sorted({s for o in mine for s in o.streams}),
                kernels=sorted({k for o in mine for k in o.kernels}),
                occurrences=len(mine),
                range_us=_median([o.range_us for o in mine]),
                gpu=TimingStats.of([o.gpu_us for o in mine]),
                kernel_us=statistics.median(o.kernel_us for o in mine),
                alone=TimingStats.of(alone) if alone else None,
                overlapped_pct=statistics.median(o.overlapped_pct for o in mine),
                launch_latency_us=_median([o.launch_latency_us for o in mine]),
                launch_latency_max_us=max(
                    (o.launch_latency_us for o in mine if o.launch_latency_us is not None), default=None
                ),
            )
        )
    wins, gaps = windows(table, occs, idx)
    order_specs = list(specs) if specs is not None else [StageSpec(n) for n in names]
    together_us = statistics.median(w.span_us for w in wins)
    return TimelineAnalysis(
        backend=backend,
        source=source,
        grouping=how,
        stages=stages,
        windows=wins,
        gaps=gaps,
        order=launch_order(occs, order_specs) if idx.ranges(ITERATION) else None,
        overlap=overlap_vs_ideal(specs, stages, together_us) if specs is not None else None,
        occurrences=occs,
    )


def frames(a: TimelineAnalysis) -> dict[str, pd.DataFrame]:
    """The analyses as tidy tables (one CSV each in a run folder)."""
    import pandas as pd

    occ = pd.DataFrame([o.model_dump() for o in a.occurrences])
    for col in ("kernels", "streams"):
        occ[col] = occ[col].map(lambda v: " ".join(str(x) for x in v))
    rows: list[dict[str, Any]] = [
        {
            "stage": s.stage,
            "streams": " ".join(map(str, s.streams)),
            "occurrences": s.occurrences,
            "range_us_median": s.range_us,
            "gpu_us_median": s.gpu.median_us,
            "kernel_us_median": s.kernel_us,
            "alone_us_median": s.alone.median_us if s.alone else None,
            "overlapped_pct_median": s.overlapped_pct,
            "launch_latency_us_median": s.launch_latency_us,
        }
        for s in a.stages
    ]
    return {
        "occurrences": occ,
        "stages": pd.DataFrame(rows),
        "windows": pd.DataFrame([w.model_dump() for w in a.windows]),
        "gaps": pd.DataFrame([g.model_dump() for g in a.gaps], columns=list(Gap.model_fields)),
    }
