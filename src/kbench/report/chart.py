"""The pictures of a run folder that come from its figures: the roofline chart (each precision's datasheet roof and
the practical roof the gains are measured against, each stage at its intensity) and the access pictures (which
program first read and wrote each element of a tensor). Each is built as plain data or a figure first, so tests
read what is drawn without pixels; matplotlib is imported only when drawing (Agg: no display)."""

from __future__ import annotations

import textwrap
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbench.analysis import roofline as rl
from kbench.analysis.figures import PlanFigures
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures
from kbench.errors import WriteRefused
from kbench.fsutil import write_atomic

if TYPE_CHECKING:  # numpy: not at import, the analysis of an .ncu-rep imports this module while a library loads
    from kbench.analysis.access import Touched

FILE = "roofline.png"
DATASHEET = "datasheet"
PRACTICAL = "practical"


def placed(figures: PlanFigures, ceilings: dict[str, Ceilings]) -> list[StageFigures]:
    """The stages the chart can show: each with an intensity, a rate and a datasheet roof to place it under."""
    return [
        s for s in figures.stages if s.intensity and s.tflops and s.precision in ceilings and figures.roofline_known
    ]


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (files only, no display), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: Path, dpi: int) -> Path:
    """``fig`` as a PNG at ``path`` (its folder made), whole or not at all (kbench.fsutil.write_atomic), then closed;
    a write the machine refuses (a full disk, a read-only folder, a folder in its place) is WriteRefused (exit 1)."""
    try:
        with warnings.catch_warnings():  # a label's character the font lacks is drawn as a box, not a warning
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
            write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=dpi))
    except OSError as e:
        raise WriteRefused(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        pyplot().close(fig)
    return path


def import_meanwhile() -> threading.Thread:
    """Import matplotlib (Agg) and pyplot in a daemon thread, for a mode that waits on a profiler before it draws:
    the import is ~0.56 s on this 2-core machine and was most of the 1.1 s annotation mode spent writing its report
    on the H100 machine. A picture's own import then finds the modules loaded, or waits for the thread."""
    thread = threading.Thread(target=pyplot, name="kbench-matplotlib-import", daemon=True)
    thread.start()
    return thread


@dataclass(frozen=True)
class Roof:
    """One roof as drawn: min(peak, intensity x bandwidth) through ``xs``."""

    precision: str
    kind: str  # DATASHEET or PRACTICAL
    tflops: float
    gbps: float
    label: str  # the legend's entry, with its figures
    xs: tuple[float, ...]
    ys: tuple[float, ...]

    @property
    def ridge(self) -> float:
        return Ceilings(self.tflops, self.gbps, "").ridge


@dataclass(frozen=True)
class Point:
    name: str
    intensity: float
    tflops: float
    label: str


@dataclass(frozen=True)
class RooflineDrawing:
    """What the roofline chart draws: the roofs (datasheet, then practical, per precision), the stages, the range."""

    title: str
    roofs: tuple[Roof, ...]
    points: tuple[Point, ...]
    xlim: tuple[float, float]


def _words(c: Ceilings, datasheet: Ceilings) -> str:
    """A practical roof's figures, each marked measured or datasheet (a device may have measured only one)."""
    compute = "measured" if c.tflops != datasheet.tflops else "datasheet"
    memory = "measured" if c.gbps != datasheet.gbps else "datasheet"
    return f"{c.tflops:g} TFLOP/s {compute}, {c.gbps:g} GB/s {memory}"


def roofline_drawing(
    figures: PlanFigures, ceilings: dict[str, Ceilings], practical: dict[str, Ceilings], title: str
) -> RooflineDrawing | None:
    """The chart as data: per precision of a placed stage its datasheet roof (``ceilings``) and its practical roof
    (``practical``: the measured ceilings Top 3's gains are measured against), each with its ridge; each stage with
    its efficiency against both. None when no stage can be placed."""
    points = placed(figures, ceilings)
    if not points:
        return None
    precisions = sorted({s.precision for s in points})
    pairs = [(p, ceilings[p], practical.get(p)) for p in precisions]
    ridges = [c.ridge for _, c, _ in pairs] + [pc.ridge for _, _, pc in pairs if pc is not None]
    intensities = [s.intensity or 1.0 for s in points]
    lo, hi = min(*intensities, *ridges) / 10, max(*intensities, *ridges) * 10
    roofs = []
    for p, c, pc in pairs:
        same = pc is None or (pc.tflops, pc.gbps) == (c.tflops, c.gbps)
        note = " (no measured roof: also the practical one)" if same else ""
        drawn = [
            (DATASHEET, c, f"{p} datasheet: {c.tflops:g} TFLOP/s, {c.gbps:g} GB/s; ridge {c.ridge:.1f} FLOP/B{note}")
        ]
        if pc is not None and not same:
            drawn.append((PRACTICAL, pc, f"{p} practical: {_words(pc, c)}; ridge {pc.ridge:.1f} FLOP/B"))
        for kind, roof, label in drawn:
            xs = (lo, roof.ridge, hi)
            ys = tuple(min(roof.tflops, x * roof.gbps / 1e3) for x in xs)
            roofs.append(Roof(p, kind, roof.tflops, roof.gbps, label, xs, ys))
    return RooflineDrawing(title, tuple(roofs), tuple(_point(s, practical.get(s.precision)) for s in points), (lo, hi))


def _point(s: StageFigures, practical: Ceilings | None) -> Point:
    shares = [f"{s.efficiency_pct:.0f}% of datasheet"] if s.efficiency_pct is not None else []
    if practical is not None and s.flops is not None and s.dram_bytes is not None and s.duration_us > 0:
        pct = 100.0 * rl.efficiency(practical, s.flops, s.dram_bytes, s.duration_us)
        if s.efficiency_pct is None or round(pct) != round(s.efficiency_pct):
            shares.append(f"{pct:.0f}% of practical")
    label = f"{s.name} ({', '.join(shares)})" if shares else s.name
    return Point(s.name, s.intensity or 0.0, s.tflops or 0.0, label)


def roofline_png(
    figures: PlanFigures, ceilings: dict[str, Ceilings], practical: dict[str, Ceilings], path: Path, title: str
) -> RooflineDrawing | None:
    """Draw the chart (``roofline_drawing``) into ``path``; None (and no file) when no stage can be placed."""
    drawing = roofline_drawing(figures, ceilings, practical, title)
    if drawing is not None:
        draw_roofline(drawing, path)
    return drawing


def draw_roofline(d: RooflineDrawing, path: Path) -> None:
    """Datasheet roofs solid, practical roofs dashed in the same colour, each ridge marked; the legend below."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    # fixed margins, not tight_layout: that draws the whole figure once more to measure it (0.13-0.19 s here)
    legend_in = 0.22 * len(d.roofs) + 0.25
    fig, ax = plt.subplots(figsize=(8, 4.6 + legend_in))
    fig.subplots_adjust(left=0.1, right=0.97, bottom=(legend_in + 0.55) / (4.6 + legend_in), top=0.93)
    colours: dict[str, str] = {}
    for r in d.roofs:
        colour = colours.setdefault(r.precision, f"C{len(colours)}")
        datasheet = r.kind == DATASHEET
        ax.plot(r.xs, r.ys, color=colour, linestyle="-" if datasheet else "--", label=r.label)
        ax.scatter([r.ridge], [r.tflops], color=colour, marker="o" if datasheet else "s", s=18, zorder=3)
        ax.annotate(
            f"ridge {r.ridge:.1f}",
            (r.ridge, r.tflops),
            textcoords="offset points",
            xytext=(-58, 5) if datasheet else (6, -12),
            fontsize=7,
            color=colour,
        )
    for p in d.points:
        ax.scatter([p.intensity], [p.tflops], color="black", marker="x", zorder=4)
        ax.annotate(p.label, (p.intensity, p.tflops), textcoords="offset points", xytext=(6, -12), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*d.xlim)
    ax.set_ylim(top=max(r.tflops for r in d.roofs) * 1.8)  # room for the ridges' labels above the roofs
    # plain tick labels (0.1, 10, 1000), not mathtext's 10^n: its parser is built on first use, ~0.08 s here
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(d.title)
    ax.grid(True, which="both", alpha=0.3)
    fig.legend(loc="lower left", bbox_to_anchor=(0.1, 0.01), fontsize=8, frameon=False)
    save_png(fig, path, dpi=110)


def axis_names(shape: tuple[int, ...]) -> tuple[str, str]:
    """The access picture's (vertical, horizontal) axis labels: the tensor as rows of its last axis, a 1-D one as
    rows of 64 elements (kbench.analysis.access.Touched)."""
    if len(shape) <= 1:
        return "element // 64 (rows of 64 elements)", "element % 64"
    if len(shape) == 2:
        return "row: index on axis 0", "column: index on axis 1"
    return f"row: axes 0-{len(shape) - 2} flattened", f"column: index on axis {len(shape) - 1} (the last)"


def traced_at(plan: Any, stage: str, config: dict[str, Any]) -> str:
    """An access picture's title: the version, the stage and the point traced, with the stage's configuration."""
    from kbench.analysis.access_figures import words

    return f"{plan.package} {plan.version}, stage {stage} at {words(plan.values())} ({words(config) or 'no config'})"


def access_figure(t: Touched, where: str, programs: int = 16) -> Any:
    """One tensor's picture as a figure: which of programs 0..``programs``-1 (in the order they ran) first read
    (left) and first wrote (right) each element of the window they touched, on the tensor's own indices; a colour
    bar names the programs (later ones share one colour where the trace has them), untouched elements white.
    ``where``: the stage and the point traced (the title)."""
    plt = pyplot()
    import matplotlib
    import numpy as np
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import BoundaryNorm, ListedColormap, to_hex

    later = bool((t.read >= programs).any() or (t.written >= programs).any())
    pairs = [to_hex(matplotlib.colormaps["tab20"](i)) for i in range(20)]  # strong colours first, unlike tab20's pairs
    order = [*pairs[0::2], *pairs[1::2]]
    colours = ["white", *(order[i % len(order)] for i in range(programs)), *(["0.75"] if later else [])]
    cmap, norm = ListedColormap(colours), BoundaryNorm(np.arange(len(colours) + 1) - 0.5, len(colours))
    names = ["not touched", "0 (ran first)", *map(str, range(1, programs))] + (
        [f"{programs} and later"] if later else []
    )
    rows, cols = t.read.shape
    step, first = t.step, t.first_row
    extent = (-step / 2, (cols - 0.5) * step, first + (rows - 0.5) * step, first - step / 2)
    vertical, horizontal = axis_names(t.shape)
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    fig.subplots_adjust(left=0.07, right=0.86, bottom=0.12, top=0.8, wspace=0.22)
    for ax, what, data in ((axes[0], "read", t.read), (axes[1], "written", t.written)):
        shown = np.where(data < 0, 0, np.minimum(data, programs) + 1)
        ax.imshow(shown, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto", extent=extent)
        ax.set_title(f"first program to have it {what}", fontsize=9)
        ax.set_xlabel(horizontal, fontsize=8)
        ax.set_ylabel(vertical, fontsize=8)
        ax.tick_params(labelsize=7)
        if (data < 0).all():
            ax.text(0.5, 0.5, f"not {what} by the traced programs", transform=ax.transAxes, ha="center", fontsize=9)
    bar = fig.colorbar(
        ScalarMappable(norm=norm, cmap=cmap), cax=fig.add_axes((0.88, 0.12, 0.018, 0.68)), ticks=range(len(colours))
    )
    bar.ax.set_yticklabels(names, fontsize=7)
    bar.ax.invert_yaxis()  # "not touched" and program 0 on top, like the rows
    bar.set_label("program, in the order they ran", fontsize=8)
    title = textwrap.fill(f"tensor {t.name} {list(t.shape)} in {where}", 110)
    fig.suptitle(f"{title}\nwindow drawn: {t.window}", fontsize=10)
    return fig


def access_png(t: Touched, path: Path, where: str, programs: int = 16) -> Path:
    """Write ``access_figure`` to ``path`` (``save_png``)."""
    return save_png(access_figure(t, where, programs), path, dpi=90)
