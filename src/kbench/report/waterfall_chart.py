"""The distance picture (distance.png): per stage, a waterfall from its time on the practical roof up to the time
measured, one bar per step of kbench.analysis.waterfall and the unexplained rest last. Built as plain data first
(``bars``), so tests read what is drawn without pixels; drawn with kbench.report.chart's matplotlib (Agg)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kbench.analysis.waterfall import Waterfall
from kbench.report.chart import pyplot, save_png

FILE = "distance.png"
ROOF, STEP, REST, MEASURED = "roof", "step", "unexplained", "measured"
MOST_STEPS = 8  # bars per stage: the largest steps, the others as one bar


@dataclass(frozen=True)
class Bar:
    label: str
    bottom: float  # us
    height: float  # us
    kind: str  # ROOF, STEP, REST or MEASURED


def bars(w: Waterfall) -> list[Bar]:
    """One stage's bars: the roof from 0, each step on top of the ones before, the unexplained rest, the total."""
    steps = list(w.steps)
    if len(steps) > MOST_STEPS:
        keep = sorted(steps, key=lambda s: -s.us)[: MOST_STEPS - 1]
        rest_us = sum(s.us for s in steps if s not in keep)
        steps = [s for s in steps if s in keep]
        extra = [(f"{len(w.steps) - len(keep)} smaller steps", rest_us)]
    else:
        extra = []
    out = [Bar(f"roof ({w.roof})", 0.0, w.roof_us, ROOF)]
    top = w.roof_us
    for label, us in [*((s.name, s.us) for s in steps), *extra]:
        out.append(Bar(label, top, us, STEP))
        top += us
    out.append(Bar("unexplained", top, w.unexplained_us, REST))
    out.append(Bar("measured", 0.0, w.measured_us, MEASURED))
    return out


COLOURS = {ROOF: "#4c72b0", STEP: "#dd8452", REST: "#8c8c8c", MEASURED: "#55a868"}


def waterfall_png(falls: Sequence[Waterfall], path: Path, title: str) -> Path | None:
    """Draw every stage's waterfall into ``path`` (one panel per stage); None (and no file) without a stage."""
    if not falls:
        return None
    plt = pyplot()
    drawn = [bars(w) for w in falls]
    rows = sum(len(b) for b in drawn)
    fig, axes = plt.subplots(len(falls), 1, figsize=(9, 1.2 + 0.36 * rows), squeeze=False)
    for ax, w, bs in zip(axes[:, 0], falls, drawn, strict=True):
        labels = [textwrap.shorten(b.label, 70, placeholder="...") for b in bs]
        ys = list(range(len(bs)))[::-1]
        ax.barh(ys, [b.height for b in bs], left=[b.bottom for b in bs], color=[COLOURS[b.kind] for b in bs])
        for y, b in zip(ys, bs, strict=True):
            ax.annotate(f"{b.height:.1f}", (b.bottom + b.height, y), xytext=(3, -3), textcoords="offset points",
                        fontsize=7)  # fmt: skip
        ax.set_yticks(ys)
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_xlabel("us")
        ax.set_title(f"{w.stage}: {w.gap_points:.1f} points to the roof, {w.unexplained_points:.1f} unexplained",
                     fontsize=9)  # fmt: skip
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.subplots_adjust(left=0.45, right=0.95, top=1 - 0.5 / (1.2 + 0.36 * rows), bottom=0.6 / (1.2 + 0.36 * rows),
                        hspace=0.6)  # fmt: skip
    return save_png(fig, path, dpi=100)
