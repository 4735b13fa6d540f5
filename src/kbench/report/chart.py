"""The roofline chart (PNG): each precision's roof from the device peaks, each stage at its intensity."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbench.analysis.figures import PlanFigures
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures

if TYPE_CHECKING:  # numpy: not at import, the analysis of an .ncu-rep imports this module while a library loads
    from kbench.analysis.access import Touched

FILE = "roofline.png"


def placed(figures: PlanFigures, ceilings: dict[str, Ceilings]) -> list[StageFigures]:
    """The stages the chart can show: each with an intensity, a rate and a datasheet roof to place it under."""
    return [
        s for s in figures.stages if s.intensity and s.tflops and s.precision in ceilings and figures.roofline_known
    ]


def import_meanwhile() -> threading.Thread:
    """Import matplotlib (Agg) and pyplot in a daemon thread, for a mode that waits on a profiler before it draws:
    the import is ~0.56 s on this 2-core machine and was most of the 1.1 s annotation mode spent writing its report
    on the H100 machine. ``roofline_png``'s own import then finds the modules loaded, or waits for the thread."""

    def load() -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot

    thread = threading.Thread(target=load, name="kbench-matplotlib-import", daemon=True)
    thread.start()
    return thread


def roofline_png(figures: PlanFigures, ceilings: dict[str, Ceilings], path: Path, title: str) -> bool:
    """Draw the chart; False (and no file) when no stage has both an intensity and a roof to place it under."""
    points = placed(figures, ceilings)
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    lo = min(min(s.intensity or 1.0 for s in points), *(ceilings[s.precision].ridge for s in points)) / 10
    hi = max(max(s.intensity or 1.0 for s in points), *(ceilings[s.precision].ridge for s in points)) * 10
    # fixed margins, not tight_layout: that draws the whole figure once more to measure it (0.13-0.19 s here)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.92)
    for precision in sorted({s.precision for s in points}):
        c = ceilings[precision]
        xs = [lo, c.ridge, hi]
        ax.plot(
            xs,
            [min(c.tflops, x * c.gbps / 1e3) for x in xs],
            label=f"{precision} roof ({c.tflops:g} TFLOP/s, {c.gbps:g} GB/s)",
        )
    for s in points:
        ax.scatter([s.intensity or 0.0], [s.tflops or 0.0], zorder=3)
        ax.annotate(
            f"{s.name} ({s.efficiency_pct:.0f}%)" if s.efficiency_pct is not None else s.name,
            (s.intensity or 0.0, s.tflops or 0.0),
            textcoords="offset points",
            xytext=(6, -12),
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    # plain tick labels (0.1, 10, 1000), not mathtext's 10^n: its parser is built on first use, ~0.08 s here
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def access_png(t: Touched, path: Path, programs: int = 16) -> Path:
    """One tensor's picture: which of programs 0..``programs``-1 (in the order they ran) first read (left) and
    first wrote (right) each element of the window they touched; later programs in the last colour, untouched
    elements white."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    def shown(a: Any) -> Any:
        return np.ma.masked_less(np.where(a >= programs, programs, a).astype(float), 0)

    cmap = matplotlib.colormaps["tab20"].resampled(programs + 1).with_extremes(bad="white")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
    for ax, what, data in ((axes[0], "read", t.read), (axes[1], "written", t.written)):
        ax.imshow(shown(data), cmap=cmap, vmin=0, vmax=programs, interpolation="nearest", aspect="auto")
        ax.set_title(f"{t.name} {list(t.shape)}: first program to have it {what}", fontsize=9)
        ax.set_xlabel(f"last axis ({t.window})" if len(t.shape) > 1 else f"element % 64 ({t.window})", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
