"""A stage's counters from its PM-sampling round (kbench.capture.sampling): the samples placed on the kernel records'
clock, then reduced per stage and per kernel. Pure.

Placing: the samples carry CUPTI's clock (with the PyTorch profiler on, its TSC ticks), the kernel records Unix
nanoseconds. The samples' own spacing (one per ``interval_ns`` of GPU time) gives the rate, the tightest pair of
clocks read together the offset; the GPU-busy metric against the records' busy time then refines the offset within
``SEARCH_US`` (``shift_us`` says by how much: more than a sample's width means the pair was off).

Reducing: a sample's value is a rate over its window. The window's counts belong to the records it overlaps (the
one-thread gap spins count as idle: they issue almost nothing), shared in proportion to overlap; a group's figure is
its counts over its own busy time: sum(v * width * own/busy) / sum(own) for a % of peak, sum(v * own/busy) for a
count. The number behind each figure is its busy time in sample widths; below ``MIN_SAMPLES`` the figure is not
given, and the reason says how many there were. Nor is it for a stage whose kernels run less than one sample width
per repetition (or a kernel shorter than one): its windows are mostly idle GPU, whose traffic would be counted as
the stage's.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from kbench.analysis.kernels import StageKernels, short_name
from kbench.model import Model

# figure -> the metric that gives it, each a single-pass PM sampling metric on GH100 (read on the H100, 2026-11-27);
# kbench.capture.sampling asks for them in this order and leaves out, from the end, what a chip refuses
WANTED = {
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "tc_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "issue_pct": "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
    "xu_pct": "sm__inst_executed_pipe_xu_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm_active_pct": "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "gpu_busy_pct": "gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm_cycles_avg": "sm__cycles_active.avg",
    "sm_cycles_max": "sm__cycles_active.max",
    "l2_pct": "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
}
MIN_SAMPLES = 5.0  # a figure needs this much of its busy time, in sample widths
SEARCH_US = 60  # the offset refinement's reach either side of the clock pair's placement
GAP = "spin_kernel"  # the round's gap (torch.cuda._sleep): idle, not the stage's
INTERVAL_ENV = "KBENCH_SAMPLING_INTERVAL_US"  # the interval a run samples at (kbench.capture.sampling reads it)


class SampledKernel(Model):
    name: str
    figures: dict[str, float] = Field(default_factory=dict)  # figure -> value (WANTED's keys, sm_busy_pct)
    samples: float  # its busy time in sample widths


class SampledStage(Model):
    stage: str
    figures: dict[str, float] = Field(default_factory=dict)
    samples: float
    reps: int
    shift_us: float  # the refinement of the clock pair's placement
    kernels: list[SampledKernel] = Field(default_factory=list)  # most busy time first
    note: str | None = None  # why a figure is not given

    def value(self, figure: str) -> float | None:
        return self.figures.get(figure)


Item = tuple[str, float, float]  # name, start ns, end ns (the records' clock)


def _place(record: dict[str, Any]) -> tuple[list[tuple[float, float, list[float]]], float]:
    """The completed samples on the records' clock (start, end, values), and the rate used (CUPTI units per ns)."""
    raw = [s for s in record["samples"] if s[0] > 0]  # the first sample's start is not recorded (0)
    steps = [b[0] - a[0] for a, b in itertools.pairwise(raw)]
    rate = statistics.median(steps) / record["interval_ns"] if steps else 1.0
    ts, unix, _ = min(record["anchors"], key=lambda a: a[2])  # the pair read closest together
    at = unix - _base(record)
    return [(at + (s - ts) / rate, at + (e - ts) / rate, list(v)) for s, e, v in raw], rate


def _base(record: dict[str, Any]) -> int:
    """Times are kept in ns after the round's first record (Unix ns as floats would lose 256 ns)."""
    return min((int(i[1]) for i in record["items"]), default=0)


def _items(record: dict[str, Any]) -> list[Item]:
    base = _base(record)
    return [(str(n), float(s - base), float(s - base + d)) for n, s, d in record["items"]]


def stage_items(record: dict[str, Any], items: list[Item]) -> list[Item] | str:
    """The stage's own records of the round (``items``: all of them, ``_items``): in each repetition, those after the
    flush's and the gap's."""
    reps = int(record["reps"])
    lead = int(record["flush_items"]) + int(record["gap_items"])
    body = len(items) - int(record["gap_items"])  # the round ends with one more gap
    if reps <= 0 or body % reps or body // reps <= lead:
        return f"the round recorded {len(items)} GPU activities, not {reps} x ({lead} flush and gap + the stage's) + 1"
    per = body // reps
    return [it for r in range(reps) for it in items[r * per + lead : (r + 1) * per]]


class _Busy:
    """Overlap of a window with a set of [start, end) intervals (sorted, non-overlapping or not: summed)."""

    def __init__(self, spans: Sequence[tuple[float, float]]) -> None:
        self.spans = sorted(spans)
        self.starts = [s for s, _ in self.spans]
        self.longest = max((e - s for s, e in self.spans), default=0.0)

    def overlap(self, a: float, b: float) -> float:
        lo = bisect.bisect_left(self.starts, a - self.longest)
        hi = bisect.bisect_right(self.starts, b)
        return sum(max(0.0, min(b, e) - max(a, s)) for s, e in self.spans[lo:hi])


def refine(samples: list[tuple[float, float, list[float]]], busy: _Busy, col: int | None) -> float:
    """The shift (ns) within ``SEARCH_US`` that best fits the GPU-busy metric (column ``col``) to the records' busy
    share of each window; 0 without that metric."""
    if col is None or not samples:
        return 0.0

    def misfit(shift: float) -> float:
        return sum((v[col] / 100.0 - busy.overlap(a + shift, b + shift) / (b - a)) ** 2 for a, b, v in samples if b > a)

    coarse = min(range(-SEARCH_US, SEARCH_US + 1, 4), key=lambda us: (misfit(us * 1e3), abs(us)))
    fine = min(range(coarse - 3, coarse + 4), key=lambda us: (misfit(us * 1e3), abs(us)))
    return fine * 1e3


def _reduce(
    samples: list[tuple[float, float, list[float]]],
    metrics: list[str],
    own: _Busy,
    busy: _Busy,
    width: float,
) -> tuple[dict[str, float], float]:
    total = [0.0] * len(metrics)
    mine = 0.0
    for a, b, v in samples:
        o = own.overlap(a, b)
        if o <= 0:
            continue
        share = o / max(busy.overlap(a, b), o)
        mine += o
        for i, x in enumerate(v):
            total[i] += x * (b - a) * share if metrics[i].endswith("_elapsed") else x * share
    samples_n = mine / width
    if mine <= 0:
        return {}, 0.0
    by_metric = {m: (t / mine if m.endswith("_elapsed") else t) for m, t in zip(metrics, total, strict=True)}
    # the SM cycle counts are kept only as their ratio: how busy the average SM was against the busiest
    figures = {k: round(by_metric[m], 2) for k, m in WANTED.items() if m in by_metric and not k.startswith("sm_cycles")}
    if by_metric.get(WANTED["sm_cycles_max"]):
        figures["sm_busy_pct"] = round(
            100.0 * by_metric[WANTED["sm_cycles_avg"]] / by_metric[WANTED["sm_cycles_max"]], 2
        )
    return figures, samples_n


def reduce(stage: str, record: dict[str, Any]) -> SampledStage | str:
    """A stage's sampled figures (and its kernels'), or why there are none."""
    items = _items(record)
    own = stage_items(record, items)
    if isinstance(own, str):
        return own
    samples, _ = _place(record)
    if not samples:
        return "PM sampling recorded no completed sample"
    metrics = list(record["metrics"])
    busy = _Busy([(s, e) for n, s, e in items if GAP not in n])
    col = metrics.index(WANTED["gpu_busy_pct"]) if WANTED["gpu_busy_pct"] in metrics else None
    shift = refine(samples, _Busy([(s, e) for _, s, e in items]), col)
    samples = [(a + shift, b + shift, v) for a, b, v in samples]
    width = float(record["interval_ns"])
    figures, n = _reduce(samples, metrics, _Busy([(s, e) for _, s, e in own]), busy, width)
    names: dict[str, list[tuple[float, float]]] = {}
    for name, s, e in own:
        names.setdefault(name, []).append((s, e))
    kernels = []
    for name, spans in names.items():
        kf, kn = _reduce(samples, metrics, _Busy(spans), busy, width)
        long = statistics.median(e - s for s, e in spans) >= width
        kernels.append(
            SampledKernel(name=short_name(name), figures=kf if kn >= MIN_SAMPLES and long else {}, samples=round(kn, 1))
        )
    kernels.sort(key=lambda k: -k.samples)
    note = None
    per_rep = sum(e - s for _, s, e in own) / int(record["reps"])
    if per_rep < width:
        # a window then holds more idle GPU than stage: whatever the GPU did in the idle part (a write-back of the
        # stage's dirty lines) is counted as the stage's (H100: a 5-us combine read 42.7% DRAM here, 19.4% under ncu)
        note = (
            f"its kernels run {per_rep / 1e3:.1f} us per repetition, less than one {width / 1e3:g}-us sample "
            "(--prof_type=annotation measures it)"
        )
        figures = {}
    elif n < MIN_SAMPLES:
        note = f"{n:.1f} samples of {width / 1e3:g} us behind the stage's figures (fewer than {MIN_SAMPLES:g})"
        figures = {}
    return SampledStage(
        stage=stage,
        figures=figures,
        samples=round(n, 1),
        reps=int(record["reps"]),
        shift_us=round(shift / 1e3, 1),
        kernels=kernels,
        note=note,
    )


# the figures the Stages table shows, and the words for how each was sampled
TABLE = {"tc_pct": "TC%", "dram_pct": "DRAM%"}
ISSUE_COUNTER = "sm__inst_executed_realtime (PM sampling: its % of peak x the SMs' cycles at the probed clock)"


def sampled_by(s: SampledStage, metrics: dict[str, str]) -> dict[str, str]:
    """How each Stages-table figure of ``s`` was measured (report.json's ``by``)."""
    return {
        k: f"PM sampling (CUPTI, in-process): {metrics[k]}, time-weighted over {s.samples:g} samples of its kernels"
        for k in TABLE
        if k in s.figures and k in metrics
    }


def evidence(
    s: SampledStage, sm_count: int | None, sm_mhz: float | None, us: float, rate: int | None
) -> dict[str, Any]:
    """The catalogue's evidence a sampled stage gives: how busy the average SM was against the busiest, the XU
    pipe, and the issued warp instructions (its % of the issue roof x what the SMs issue at the probed clock)."""
    out: dict[str, Any] = {}
    if (busy := s.value("sm_busy_pct")) is not None:
        out["sm_busy_pct"] = busy
    if (xu := s.value("xu_pct")) is not None:
        out["pipes"] = {"xu": xu}
    pct = s.value("issue_pct")
    if pct is not None and sm_count and sm_mhz and rate:
        cycles = sm_count * sm_mhz * us
        out.update(sm_cycles=cycles, issued=pct / 100.0 * rate * cycles, issued_counter=ISSUE_COUNTER)
    return out


def moved_bytes(dram_pct: float, peak_gbps: float, us: float) -> float:
    """The DRAM bytes a sampled DRAM% stands for over ``us``: a share of the peak it is a % of (GB/s x 1e3 = bytes
    per us)."""
    return dram_pct / 100.0 * peak_gbps * 1e3 * us


def kernel_bytes(s: SampledStage, ks: StageKernels, peak_gbps: float) -> StageKernels:
    """The stage's kernels with the DRAM bytes each moved per run as sampled: its DRAM% (of the DRAM's peak, the
    datasheet's: the H100's partial sums read 129 of their 134 MB so, 116 at the practical 3009 GB/s) x that peak x
    its time per run (CUPTI); a kernel sampling gave no figure keeps none."""
    pct = {k.name: k.figures["dram_pct"] for k in s.kernels if "dram_pct" in k.figures}
    by = f"PM sampling: DRAM% ({WANTED['dram_pct']}) x {peak_gbps:g} GB/s (the peak it is a % of) x its time per run"
    return ks.model_copy(
        update={
            "kernels": [
                k.model_copy(update={"dram_bytes": moved_bytes(pct[k.short], peak_gbps, k.us), "bytes_by": by})
                if k.short in pct and k.us is not None
                else k
                for k in ks.kernels
            ]
        }
    )


def read(found: dict[str, Any]) -> tuple[dict[str, SampledStage], list[str]]:
    """samples.json (kbench.capture.sampling) -> each sampled stage, and the Environment's lines: what sampled and
    how, or why nothing did; each stage without figures, and why."""
    if "not_available" in found:
        return {}, [f"Counters (TC%, DRAM%): n/a in this run: {found['not_available']}"]
    out: dict[str, SampledStage] = {}
    notes: list[str] = []
    for name, record in found.get("stages", {}).items():
        got = reduce(name, record) if "not_measured" not in record else str(record["not_measured"])
        if isinstance(got, str):
            notes.append(f"Counters of {name} not sampled: {got}")
            continue
        out[name] = got
        if got.note:
            notes.append(f"Counters of {name} not given: {got.note}")
    about = found.get("sampler", {})
    metrics = about.get("metrics", {})
    counts = ", ".join(f"{n} {s.samples:g}" for n, s in out.items())
    notes.insert(
        0,
        f"Counters (TC%, DRAM%) sampled in-process by CUPTI PM sampling (cupti-python {about.get('version', '?')}, "
        f"{about.get('chip', '?')}, one sample per {about.get('interval_ns', 0) / 1e3:g} us of GPU time, in rounds "
        f"of their own after every timing): TC% {metrics.get('tc_pct', 'not sampled')}, DRAM% "
        f"{metrics.get('dram_pct', 'not sampled')}; samples behind each stage: {counts or 'none'}",
    )
    return out, notes
