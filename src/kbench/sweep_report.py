"""A sweep's table, plots and bound-flip map (sweep.csv, sweep.md, plots/), from its rows (kbench.sweep runs the
points): the duration, TFLOP/s, GB/s, % of roof and class per version and point (an access sweep, which runs no GPU:
what each point's trace predicts for the device); where along each swept parameter the class changes; which version
is fastest where; and, for a Ray sweep, where the points ran.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kbench.errors import ConfigError
from kbench.fsutil import write_text_atomic
from kbench.report.render import num
from kbench.sweep import Row


def _sort_key(value: str) -> tuple[int, float | str]:
    try:
        return (0, float(value))
    except ValueError:
        return (1, value)


INTERPRETED = "interpreter time (us; CPU, not GPU time)"


def time_axis(rows: list[Row]) -> tuple[str, Callable[[Row], float | None]]:
    """What a sweep's points were timed by, and each row's time: the GPU's duration, or, for a sweep that ran no GPU
    (access mode), Triton's CPU interpreter's time, said to be that."""
    if any(r.interpreter_us is not None for r in rows) and all(r.duration_us is None for r in rows):
        return INTERPRETED, lambda r: r.interpreter_us
    return "duration (us)", lambda r: r.duration_us


def predicted_for(rows: list[Row]) -> str:
    """The device an access sweep's points predict for, in words (each point's own where they differ)."""
    return " / ".join(dict.fromkeys(r.device for r in rows if r.device)) or "the device"


def _over(r: Row) -> float | None:
    """Bytes the point's lanes load and store over the plan's model of them."""
    return r.requested_bytes / r.model_bytes if r.requested_bytes is not None and r.model_bytes else None


def _short(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


# an access sweep's columns and plots: what each point's trace predicts (never the interpreter's time, CPU noise),
# with how a cell shows it and the plot's y range where the figure has one (sectors hold 32 bytes, lanes 100%)
ACCESS: tuple[tuple[str, Callable[[Row], float | None], Callable[[float | None], str], tuple[float, float] | None], ...]
ACCESS = (
    ("predicted time (us)", lambda r: r.predicted_us, _short, None),
    ("bytes loaded and stored / model", _over, lambda v: num(v, 2), None),
    ("bytes used per 32-B sector", lambda r: r.sector_use, lambda v: num(v, 1), (0.0, 33.0)),
    ("worst line's bytes per sector", lambda r: r.worst_sector_use, lambda v: num(v, 1), (0.0, 33.0)),
    ("masked lanes (%)", lambda r: r.masked_pct, lambda v: num(v, 1), (0.0, 100.0)),
)


def table_md(rows: list[Row], swept: Sequence[str]) -> str:
    label, time = time_axis(rows)
    head = ["version", *swept, label, "TFLOP/s", "GB/s", "% of roof", "roof (model)", "bottleneck", "status"]
    if label == INTERPRETED:  # access mode: the trace's predictions, the interpreter's time shown last
        head = ["version", *swept, *(name for name, _, _, _ in ACCESS), "roof (model)", "class (predicted)", label,
                "status"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.version, *(r.params[n] for n in swept), num(time(r)), num(r.tflops), num(r.gbps, 1),
                 num(r.roof_pct, 1), r.roof or "n/a", r.bottleneck or "n/a", r.status.replace("|", "/")]  # fmt: skip
        if label == INTERPRETED:
            cells = [r.version, *(r.params[n] for n in swept), *(show(value(r)) for _, value, show, _ in ACCESS),
                     r.roof or "n/a", r.bottleneck or "n/a", num(time(r)), r.status.replace("|", "/")]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# sweep.csv's columns of what an access point's trace predicts (empty for a point that ran on a GPU)
PREDICTED = ("predicted_us", "sector_use", "worst_sector_use", "masked_pct", "requested_bytes", "model_bytes")


def table_csv(rows: list[Row], path: Path, swept: Sequence[str]) -> None:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["version", *swept, "duration_us", "interpreter_us", "tflops", "gbps", "roof_pct", "roof", "bottleneck",
                *PREDICTED, "device", "status", "run"])  # fmt: skip
    for r in rows:
        w.writerow([r.version, *(r.params[n] for n in swept), r.duration_us, r.interpreter_us, r.tflops, r.gbps,
                    r.roof_pct, r.roof, r.bottleneck, *(getattr(r, k) for k in PREDICTED), r.device, r.status,
                    r.run])  # fmt: skip
    write_text_atomic(path, buf.getvalue())


def _lines(
    rows: list[Row], along: str, swept: Sequence[str]
) -> dict[tuple[str, tuple[tuple[str, str], ...]], list[Row]]:
    """Rows grouped into lines along one parameter: per version and combination of the other swept values."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], list[Row]] = {}
    for r in rows:
        if r.status != "ok":
            continue
        others = tuple((n, r.params[n]) for n in swept if n != along)
        out.setdefault((r.version, others), []).append(r)
    return {k: sorted(v, key=lambda r: _sort_key(r.params[along])) for k, v in out.items()}


def _changes(line: list[Row], along: str, what: Callable[[Row], str | None], suffix: str) -> str:
    flips = [
        f"{what(a)} -> {what(b)} between {along}={a.params[along]} and {along}={b.params[along]}"
        for a, b in itertools.pairwise(line)
        if what(a) != what(b)
    ]
    return "; ".join(flips) if flips else " / ".join(dict.fromkeys(what(r) or "n/a" for r in line)) + suffix


def flip_map(rows: list[Row], swept: Sequence[str]) -> list[str]:
    """Where the measured classification changes along each swept parameter, per version; where the roof that
    bounds the plan's model changes (memory to compute as the intensity crosses the ridge point); and the fastest
    version at each point (with its lead over the next), where more than one version ran."""
    classes, roofs = [], []
    for along in swept:
        for (version, others), line in _lines(rows, along, swept).items():
            where = ", ".join(f"{n}={v}" for n, v in others) or "all points"
            changes = _changes(line, along, lambda r: r.bottleneck, "-bound throughout")
            classes.append(f"- along {along} ({version}, {where}): {changes}")
            changes = _changes(line, along, lambda r: r.roof, " roof throughout")
            roofs.append(f"- roof of the model along {along} ({version}, {where}): {changes}")
    out = classes + roofs
    ranked = _ranked(rows, swept, lambda r: r.duration_us)
    if not ranked and len({r.version for r in rows if r.interpreter_us is not None}) > 1:
        out.append("- no fastest version is named: the points' times are Triton's CPU interpreter's, not GPU time")
        out += _lowest_predicted(rows, swept)
    for point, best, second, lead in ranked:
        out.append(f"- fastest at {point}: {best.version} ({num(best.duration_us)} us, {lead:.2f}x {second.version})")
    return out


def _ranked(
    rows: list[Row], swept: Sequence[str], time: Callable[[Row], float | None]
) -> list[tuple[str, Row, Row, float]]:
    """Per point where several versions have a ``time``: the point's name, the lowest and the next, and its lead."""
    by_point: dict[str, list[Row]] = {}
    for r in rows:
        if r.status == "ok" and time(r):
            by_point.setdefault(json.dumps(sorted((n, r.params[n]) for n in swept)), []).append(r)
    out = []
    for key, contenders in by_point.items():
        if len(contenders) >= 2:
            best, second = sorted(contenders, key=lambda r: time(r) or 0.0)[:2]
            point = ", ".join(f"{n}={v}" for n, v in json.loads(key)) or "the point"
            out.append((point, best, second, (time(second) or 0.0) / (time(best) or 1.0)))
    return out


def _lowest_predicted(rows: list[Row], swept: Sequence[str]) -> list[str]:
    """Per point where several versions were traced: the one its trace predicts the lowest time for, said to be a
    prediction (the model's time on the device's roofs, scaled by sectors and masked lanes), not a measurement."""
    out = []
    for point, best, second, lead in _ranked(rows, swept, lambda r: r.predicted_us):
        if lead <= 1.0:
            out.append(f"- the same predicted time at {point} for {best.version} and {second.version}: their traces "
                       "differ in nothing the prediction weighs")  # fmt: skip
            continue
        out.append(f"- lowest predicted time at {point}: {best.version} ({num(best.predicted_us)} us predicted on "
                   f"{best.device or 'the device'}, {lead:.2f}x {second.version}; a prediction from the trace, not a "
                   "measurement)")  # fmt: skip
    return out


def plots(rows: list[Row], swept: Sequence[str], plot_dir: Path) -> list[Path]:
    """For each swept parameter, duration and % of roof against it (a sweep that ran no GPU: what each point's trace
    predicts, its time on the device's roofs, bytes against the model, bytes used per sector and masked lanes; never
    the interpreter's time, which is CPU noise): one line per version (and combination of the other swept values),
    markers by bottleneck class."""
    from kbench.report.chart import pyplot, save_png

    plt = pyplot()
    markers = {"Memory": "o", "Compute": "s", "Latency": "^"}
    axis, time = time_axis(rows)
    Panel = tuple[str, Callable[[Row], float | None], tuple[float, float] | None]
    panels: list[Panel] = [(axis, time, None), ("% of roof", lambda r: r.roof_pct, None)]
    if axis == INTERPRETED:
        device = predicted_for(rows)
        panels = [(f"predicted time on {device} (us)", ACCESS[0][1], None),
                  *((n, v, y) for n, v, _, y in (ACCESS[1], ACCESS[2], ACCESS[4]))]  # fmt: skip
    written = []
    if plot_dir.is_symlink():  # a resumed sweep folder may be anyone's: pictures land in it, nowhere a link leads
        raise ConfigError(f"{plot_dir} is a symbolic link, which kbench never makes: remove it and resume again")
    plot_dir.mkdir(parents=True, exist_ok=True)
    for along in swept:
        lines = _lines(rows, along, swept)
        if not lines:
            continue
        across = min(len(panels), 2)  # two panels a row
        down = -(-len(panels) // across)
        fig, grid = plt.subplots(down, across, figsize=(5.5 * across, 4.2 * down), squeeze=False)
        axes = [list(grid.flat)]
        for (version, others), line in lines.items():
            label = version + ("" if not others else " (" + ", ".join(f"{n}={v}" for n, v in others) + ")")
            xs = [float(r.params[along]) if _sort_key(r.params[along])[0] == 0 else i for i, r in enumerate(line)]
            for ax, (_, value, _) in zip(axes[0], panels, strict=True):
                ys = [value(r) for r in line]
                drawn = ax.plot(xs, [y if y is not None else float("nan") for y in ys], label=label)[0]
                for x, y, r in zip(xs, ys, line, strict=True):
                    if y is not None:
                        ax.scatter([x], [y], marker=markers.get(r.bottleneck or "", "x"), color=drawn.get_color())
        for ax, (what, _, limits) in zip(axes[0], panels, strict=True):
            ax.set_xlabel(along)
            ax.set_ylabel(what)
            if limits is not None:
                ax.set_ylim(*limits)
            ax.set_xscale("log", base=2)
            ax.grid(True, alpha=0.3)
        axes[0][0].set_yscale("log")
        axes[0][-1].legend(fontsize=7, title="markers: o Memory, s Compute, ^ Latency", title_fontsize=7)
        fig.tight_layout()
        written.append(save_png(fig, plot_dir / f"{along}.png", dpi=100))
    return written


MEASURED = (
    "% of roof is the stages' roofline bounds (datasheet peaks) over the measured duration; roof (model) is the roof "
    "that bounds the version's own FLOP/byte model (analytic: its intensity against the ridge point); bottleneck is "
    "the measured class (Latency: far from both roofs, report contract section 4)."
)


def write(rows: list[Row], spec: dict[str, Any], sweep_dir: Path) -> str:
    """sweep.csv, plots/ and sweep.md (the table, then the bound-flip map); returns sweep.md's text."""
    swept = list(spec["swept"])
    table_csv(rows, sweep_dir / "sweep.csv", swept)
    drawn = plots(rows, swept, sweep_dir / "plots")
    fixed = ", ".join(f"{k}={v}" for k, v in spec["fixed"].items()) or "defaults"
    ranges = "; ".join(f"{k} in " + ",".join(v) for k, v in spec["swept"].items()) or "nothing"
    text = "\n".join(
        [
            f"# Sweep: {spec['kernel']} ({spec['mode']} mode)",
            "",
            f"Versions {', '.join(spec['versions'])}; swept {ranges}; fixed {fixed}.",
            *(interpreted(rows) or [MEASURED]),
            "",
            table_md(rows, swept),
            "",
            "## Bound-flip map",
            "",
            *(flip_map(rows, swept) or ["- nothing to map (no point finished)"]),
            "",
            "## Plots",
            "",
            *[f"- `plots/{p.name}`" for p in drawn],
            "",
            *placement(rows),
        ]
    )
    write_text_atomic(sweep_dir / "sweep.md", text)
    return text


def interpreted(rows: list[Row]) -> list[str]:
    """sweep.md's word on points that ran no GPU (access mode): what their time and class are, and are not."""
    if time_axis(rows)[0] != INTERPRETED:
        return []
    return [
        f"These points ran no GPU (access mode): each was traced under Triton's CPU interpreter and its figures are "
        f"what the trace predicts for {predicted_for(rows)}: predicted time is the plan's model on the device's "
        "practical roofs, scaled by the sectors its lanes touch beyond those they use and the bytes beyond the model "
        "(memory-bound stages) or by its masked lanes (the others); bytes loaded and stored / model above 1 reads data "
        "more than once; bytes used per 32-B sector is 32 for coalesced lines; class (predicted) is the class of the "
        "model on that device. The interpreter's time is CPU time, shown last and never compared: no TFLOP/s, GB/s, "
        "% of roof or fastest version by it."
    ]


def placement(rows: list[Row]) -> list[str]:
    """Where the points ran, per host and GPU, when they ran on Ray's nodes (nothing for a sweep on this host)."""
    where: dict[tuple[str, str], int] = {}
    for r in rows:
        if r.node is not None:
            at = (r.node, r.gpu or "n/a")
            where[at] = where.get(at, 0) + 1
    if not where:
        return []
    lines = [f"- {node}, GPU {gpu}: {n} point(s)" for (node, gpu), n in sorted(where.items())]
    return ["## Where the points ran (Ray)", "", *lines, ""]
