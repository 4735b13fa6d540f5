"""The timeline picture (``timeline.png``) of nsys mode and of `kbench analyze` on a timeline capture: one
representative stretch of the capture, one lane per CUDA stream with each kernel, copy or set as a bar coloured by
the stage that launched it, a lane for the stages' NVTX ranges on the CPU, a lane where two or more kernels ran at
once, and the GPU's idle time shaded; time in microseconds from the stretch's start.

The stretch: with ``kbench:iteration`` ranges (kbench's own captures), the iteration of median plan span; without
them (a capture made elsewhere), the busiest run of GPU work between idle stretches longer than all its GPU work.
``drawing`` builds the picture as plain data (tests read it without pixels); ``draw_timeline`` renders it.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbench.analysis import timeline as tl
from kbench.analysis.timeline_index import union
from kbench.nvtx import ITERATION, stage_range
from kbench.report.chart import pyplot, save_png

if TYPE_CHECKING:
    import pandas as pd

    from kbench.analysis.timeline_stages import Occurrence, TimelineAnalysis

FILE = "timeline.png"
CPU_LANE = "CPU: NVTX ranges"
OVERLAP_LANE = "2+ kernels at once"
OTHER = "other GPU work"  # launched by no stage (an L2 flush between iterations, say)
COLOURED = 19  # stages with a colour of their own (tab20 less grey); the rest share OTHER's grey
LABEL_SHARE = 0.06  # a bar at least this share of the stretch wide carries its kernel's name
# caps that keep the picture's cost and size whatever the capture holds (a trace of 12,000 streams drew a 540,250 px
# tall PNG in 333 s; 40,000 named bars spent 162 s laying out text): the rest is folded or unnamed, and said
MAX_STREAM_LANES = 24  # stream lanes drawn: the busiest; the others share one lane
MAX_LABELS = 40  # bars named: the widest of those wide enough


@dataclass(frozen=True)
class Stretch:
    """The part of the timeline drawn, and why that one (the report's words)."""

    start_ns: int
    end_ns: int
    what: str
    origin: str  # where its time axis starts, in words


@dataclass(frozen=True)
class Bar:
    lane: str
    start_us: float  # from the stretch's start
    end_us: float
    stage: str  # its legend entry: the stage's short name, or OTHER
    name: str  # the kernel's (or copy's) short name


@dataclass(frozen=True)
class TimelineDrawing:
    title: str
    stretch: Stretch
    lanes: tuple[str, ...]  # top to bottom
    bars: tuple[Bar, ...]  # GPU work (stream lanes) and the stages' ranges (CPU lane)
    idle: tuple[tuple[float, float], ...]  # no GPU work on any stream, us from the start
    concurrent: tuple[tuple[float, float], ...]  # two or more kernels running
    stages: tuple[str, ...]  # the legend's stages, in the plan's order
    labels: tuple[Bar, ...] = ()  # the bars named on the picture: the widest MAX_LABELS of the wide ones, none in
    # the lane of the quieter streams (their bars overlap)
    wide: int = 0  # bars wide enough to carry a name (LABEL_SHARE of the stretch)
    folded: int = 0  # streams drawn in the one lane of the quieter streams (0: a lane each)

    @property
    def length_us(self) -> float:
        return (self.stretch.end_ns - self.stretch.start_ns) / 1e3

    @property
    def left_out(self) -> str:
        """What the picture does not show one by one, in words ("" where it shows everything)."""
        said = []
        if self.folded:
            said.append(f"the {MAX_STREAM_LANES - 1} busiest streams in a lane each, {self.folded:,} others in one")
        if self.wide > len(self.labels):
            said.append(f"names on the {len(self.labels)} widest of {self.wide:,} wide bars")
        return "; ".join(said)


def short(name: str, width: int = 40) -> str:
    """A kernel or stage name as a legend or a bar says it: a C++ template's bare function name, at most ``width``."""
    plain = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    bare = re.split(r"[<(]", plain, maxsplit=1)[0].rsplit("::", 1)[-1].strip() or name
    return bare if len(bare) <= width else bare[: width - 1] + "…"


def stretch(frame: pd.DataFrame, analysis: TimelineAnalysis) -> Stretch:
    """The iteration of median plan span (the lower middle of an even count), or, in a capture without iteration
    ranges, its busiest run of GPU work (see the module's docstring)."""
    windows = analysis.windows
    if tl.ranges(frame, ITERATION):
        w = sorted(windows, key=lambda w: (w.span_us, w.index))[(len(windows) - 1) // 2]
        start = w.start_ns
        what = (
            f"iteration {w.index} of {len(windows)}, the one of median plan span ({w.span_us:.2f} us)"
            if len(windows) > 1
            else f"its one iteration (plan span {w.span_us:.2f} us)"
        )
        return Stretch(start, start + round(w.window_us * 1e3), what, f"the start of iteration {w.index}'s range")
    w = windows[0]
    start, end = w.start_ns, w.start_ns + round(w.window_us * 1e3)
    runs = _runs(union(_clipped(frame[frame["kind"].isin(tl.GPU_KINDS)], start, end)))
    if len(runs) < 2:
        whole = "the whole analysed window (the capture has no kbench:iteration ranges)"
        return Stretch(start, end, whole, "the first stage's start")
    busy, (a, b) = max((sum(y - x for x, y in run), (run[0][0], run[-1][1])) for run in runs)
    pad = (b - a) // 20
    return Stretch(
        max(start, a - pad),
        min(end, b + pad),
        f"the busiest stretch of GPU work ({busy / 1e3:.2f} us busy) between idle stretches longer than all the "
        "capture's GPU work (it has no kbench:iteration ranges)",
        "the stretch's start",
    )


def _runs(spans: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Busy spans in runs, a new run after each idle stretch longer than all the spans' busy time together."""
    total = sum(b - a for a, b in spans)
    runs: list[list[tuple[int, int]]] = []
    for a, b in spans:
        if runs and a - runs[-1][-1][1] <= total:
            runs[-1].append((a, b))
        else:
            runs.append([(a, b)])
    return runs


def _clipped(rows: pd.DataFrame, start: int, end: int) -> list[tuple[int, int]]:
    return [
        (max(start, int(a)), min(end, int(b)))
        for a, b in zip(rows["start_ns"], rows["end_ns"], strict=True)
        if min(end, int(b)) > max(start, int(a))
    ]


def _stages_of(frame: pd.DataFrame, gpu: pd.DataFrame, occs: list[Occurrence]) -> list[str | None]:
    """The stage that launched each row of ``gpu`` (None: no drawn occurrence did): through the launch calls
    (correlation ids) that began inside the stage's range, as ``timeline.launched_in`` matches them, or, in a capture
    grouped by kernel names, the kernel at the occurrence's start. One sorted search per range, not a scan."""
    import numpy as np

    api = frame[frame["kind"].isin(["runtime", "driver"])].dropna(subset=["correlation"]).sort_values("start_ns")
    starts, ids = api["start_ns"].to_numpy(), api["correlation"].to_numpy()
    by_call: dict[int, str] = {}
    by_start: dict[tuple[int, str], str] = {}
    for o in occs:
        if o.range_start_ns is not None and o.range_us is not None:
            lo = np.searchsorted(starts, o.range_start_ns, "left")
            hi = np.searchsorted(starts, o.range_start_ns + round(o.range_us * 1e3), "right")
            by_call.update(dict.fromkeys((int(c) for c in ids[lo:hi]), o.stage))
        else:
            by_start.update({(o.gpu_start_ns, k): o.stage for k in o.kernels})
    known = [c is not None and c == c for c in gpu["correlation"]]  # NaN (no correlation id) is not equal to itself
    return [
        (by_call.get(int(c)) if k else None) or by_start.get((int(t), str(n)))
        for c, k, t, n in zip(gpu["correlation"], known, gpu["start_ns"], gpu["name"], strict=True)
    ]


def _at_least_two(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where two or more of ``spans`` run at once."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    out, running, since = [], 0, 0
    for t, step in events:
        if running < 2 <= running + step:
            since = t
        elif running >= 2 > running + step and t > since:
            out.append((since, t))
        running += step
    return union(out)


def drawing(frame: pd.DataFrame, analysis: TimelineAnalysis, title: str) -> TimelineDrawing:
    """The picture as data: ``stretch``'s GPU work by stream and stage, the stages' ranges, idle and overlap."""
    s = stretch(frame, analysis)
    occs = [
        o
        for o in analysis.occurrences
        if o.phase == "together" and o.gpu_start_ns < s.end_ns and o.gpu_end_ns > s.start_ns
    ]
    gpu = frame[frame["kind"].isin(tl.GPU_KINDS) & (frame["end_ns"] > s.start_ns) & (frame["start_ns"] < s.end_ns)]
    order = [short(st.stage) for st in analysis.stages]
    colour = {name: name if i < COLOURED else OTHER for i, name in enumerate(dict.fromkeys(order))}
    launched_by = _stages_of(frame, gpu, occs)

    def us(t: int) -> float:
        return (min(max(t, s.start_ns), s.end_ns) - s.start_ns) / 1e3

    length = us(s.end_ns)
    devices = {d for d in gpu["device"].dropna()}
    bars = []
    columns = (gpu[c] for c in ("stream", "device", "start_ns", "end_ns", "name"))
    for (stream, device, start, end, name), by in zip(zip(*columns, strict=True), launched_by, strict=True):
        lane = f"stream {_id(stream)}" + (f" (GPU {_id(device)})" if len(devices) > 1 else "")
        stage = colour[short(by)] if by is not None else OTHER
        bars.append(Bar(lane, us(int(start)), us(int(end)), stage, short(str(name))))
    ranges = [
        Bar(
            CPU_LANE,
            us(o.range_start_ns),
            us(o.range_start_ns + round(o.range_us * 1e3)),
            colour[short(o.stage)],
            stage_range(o.stage),
        )
        for o in occs
        if o.range_start_ns is not None and o.range_us is not None
    ]
    bars, streams, folded = _fold(bars)
    spans = _clipped(gpu, s.start_ns, s.end_ns)
    busy = union(spans)
    gaps = [
        (a, b)
        for a, b in zip([s.start_ns] + [b for _, b in busy], [a for a, _ in busy] + [s.end_ns], strict=True)
        if b > a
    ]
    kernel_spans = _clipped(gpu[gpu["kind"] == "kernel"], s.start_ns, s.end_ns)
    used = {b.stage for b in [*bars, *ranges]}
    wide = [b for b in [*ranges, *bars] if b.end_us > b.start_us and b.end_us - b.start_us >= LABEL_SHARE * length]
    named = [b for b in wide if not folded or b.lane != streams[-1]]  # the folded lane's bars overlap: none named
    return TimelineDrawing(
        title=title,
        stretch=s,
        lanes=tuple(([CPU_LANE] if ranges else []) + streams + [OVERLAP_LANE]),
        bars=tuple(ranges + bars),
        idle=tuple((us(a), us(b)) for a, b in gaps),
        concurrent=tuple((us(a), us(b)) for a, b in _at_least_two(kernel_spans)),
        stages=tuple(n for n in dict.fromkeys([*colour.values(), OTHER]) if n in used),
        labels=tuple(sorted(named, key=lambda b: b.start_us - b.end_us)[:MAX_LABELS]),  # widest first, ties in order
        wide=len(wide),
        folded=folded,
    )


def _fold(bars: list[Bar]) -> tuple[list[Bar], list[str], int]:
    """The bars with the quieter streams' lanes folded into one where there are more than MAX_STREAM_LANES, the
    stream lanes top to bottom, and how many streams were folded. Busiest: the most GPU time in the stretch."""
    busy: dict[str, float] = {}
    for b in bars:
        busy[b.lane] = busy.get(b.lane, 0.0) + b.end_us - b.start_us
    lanes = sorted(busy, key=lambda lane: (len(lane), lane))
    if len(lanes) <= MAX_STREAM_LANES:
        return bars, lanes, 0
    kept = set(sorted(lanes, key=lambda lane: -busy[lane])[: MAX_STREAM_LANES - 1])  # ties in lane order
    other = f"{len(lanes) - len(kept):,} other streams"
    folded = [b if b.lane in kept else replace(b, lane=other) for b in bars]
    return folded, [lane for lane in lanes if lane in kept] + [other], len(lanes) - len(kept)


def described(frame: pd.DataFrame, analysis: TimelineAnalysis) -> str:
    """What the picture draws, as the report says it: the stretch, and what it folds or leaves unnamed."""
    d = drawing(frame, analysis, "")
    return f"{d.stretch.what} ({d.left_out})" if d.left_out else d.stretch.what


def _id(v: Any) -> str:
    return str(int(v)) if v is not None and v == v else "?"  # NaN (unknown) is not equal to itself


def timeline_png(frame: pd.DataFrame, analysis: TimelineAnalysis, path: Path, title: str) -> TimelineDrawing:
    """Draw the picture (``drawing``) into ``path``."""
    d = drawing(frame, analysis, title)
    draw_timeline(d, path)
    return d


def figure_inches(d: TimelineDrawing) -> tuple[float, float]:
    """The picture's width and height in inches (100 pixels each): a band per lane and per legend row, both capped
    (MAX_STREAM_LANES; the legend's stages: COLOURED and OTHER)."""
    return 12.0, 1.3 + 0.45 * len(d.lanes) + 0.25 * _legend_rows(d)


def _legend_rows(d: TimelineDrawing) -> int:
    return -(-(len(d.stages) + 2) // 4)  # four entries a row: the stages, idle, overlap


def draw_timeline(d: TimelineDrawing, path: Path) -> None:
    plt = pyplot()
    from matplotlib.patches import Patch

    colours = {name: f"C{i}" if i < 10 else plt.get_cmap("tab20")(2 * (i - 10) + 1) for i, name in enumerate(d.stages)}
    colours[OTHER] = "0.6"
    rows = len(d.lanes)
    width, height = figure_inches(d)
    legend_rows = _legend_rows(d)
    fig, ax = plt.subplots(figsize=(width, height))
    fig.subplots_adjust(left=0.13, right=0.98, top=1 - 0.55 / height, bottom=(0.55 + 0.25 * legend_rows) / height)
    y = {lane: rows - 1 - i for i, lane in enumerate(d.lanes)}
    idle = [(a, b - a) for a, b in d.idle]  # one collection, not a patch per gap
    ax.broken_barh(idle, (-0.6, rows), facecolors="0.93", edgecolors="0.75", hatch="//", linewidth=0, zorder=0)
    grouped: dict[tuple[str, str], list[tuple[float, float]]] = {}  # one collection per lane and stage, not per bar
    for bar in d.bars:
        grouped.setdefault((bar.lane, bar.stage), []).append((bar.start_us, max(bar.end_us, bar.start_us)))
    for bar in d.labels:
        label = bar.name if bar.lane != CPU_LANE else bar.name.removeprefix("kbench.")
        ax.text((bar.start_us + bar.end_us) / 2, y[bar.lane], label, ha="center", va="center", fontsize=7,
                clip_on=True, zorder=3)  # fmt: skip
    for (lane, stage), spans in grouped.items():
        c, alpha = colours[stage], 0.45 if lane == CPU_LANE else 1.0
        merged = [(a, b - a) for a, b in union(spans)]  # bars of one colour that overlap drawn once: 40,000 took 4 s
        ax.broken_barh(merged, (y[lane] - 0.35, 0.7), facecolors=c, edgecolors=c, alpha=alpha, linewidth=0.6, zorder=2)
    overlap = [(a, b - a) for a, b in d.concurrent]
    ax.broken_barh(overlap, (y[OVERLAP_LANE] - 0.25, 0.5), facecolors="black", zorder=2)
    ax.set_yticks([y[lane] for lane in d.lanes], list(d.lanes), fontsize=8)
    ax.set_ylim(-0.6, rows - 0.4)
    ax.set_xlim(0, d.length_us * 1.01 or 1.0)  # a capture of zero-length work still gets an axis
    ax.set_xlabel(f"time (us) from {d.stretch.origin}", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    what = f"{d.stretch.what}; {d.left_out}" if d.left_out else d.stretch.what
    ax.set_title(textwrap.fill(f"{d.title}: {what}", 150), fontsize=9)
    handles = [Patch(facecolor=colours[name], label=name) for name in d.stages]
    handles.append(Patch(facecolor="0.93", edgecolor="0.75", hatch="//", label="GPU idle (no work on any stream)"))
    handles.append(Patch(facecolor="black", label="two or more kernels at once"))
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    save_png(fig, path, dpi=100)
