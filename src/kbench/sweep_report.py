"""A sweep's table, plots and bound-flip map (sweep.csv, sweep.md, plots/), from its rows (kbench.sweep runs the
points): the duration, TFLOP/s, GB/s, % of roof and class per version and point; where along each swept parameter
the class changes; which version is fastest where; and, for a Ray sweep, where the points ran.
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


def table_md(rows: list[Row], swept: Sequence[str]) -> str:
    label, time = time_axis(rows)
    head = ["version", *swept, label, "TFLOP/s", "GB/s", "% of roof", "roof (model)", "bottleneck", "status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.version, *(r.params[n] for n in swept), num(time(r)), num(r.tflops), num(r.gbps, 1),
                 num(r.roof_pct, 1), r.roof or "n/a", r.bottleneck or "n/a", r.status.replace("|", "/")]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table_csv(rows: list[Row], path: Path, swept: Sequence[str]) -> None:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["version", *swept, "duration_us", "interpreter_us", "tflops", "gbps", "roof_pct", "roof", "bottleneck",
                "status", "run"])  # fmt: skip
    for r in rows:
        w.writerow([r.version, *(r.params[n] for n in swept), r.duration_us, r.interpreter_us, r.tflops, r.gbps,
                    r.roof_pct, r.roof, r.bottleneck, r.status, r.run])  # fmt: skip
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
    by_point: dict[str, list[Row]] = {}
    for r in rows:
        if r.status == "ok" and r.duration_us:
            by_point.setdefault(json.dumps(sorted((n, r.params[n]) for n in swept)), []).append(r)
    if not by_point and len({r.version for r in rows if r.interpreter_us is not None}) > 1:
        out.append("- no fastest version is named: the points' times are Triton's CPU interpreter's, not GPU time")
    for key, contenders in by_point.items():
        if len(contenders) < 2:
            continue
        best, second = sorted(contenders, key=lambda r: r.duration_us or 0.0)[:2]
        point = ", ".join(f"{n}={v}" for n, v in json.loads(key)) or "the point"
        lead = (second.duration_us or 0.0) / (best.duration_us or 1.0)
        out.append(f"- fastest at {point}: {best.version} ({num(best.duration_us)} us, {lead:.2f}x {second.version})")
    return out


def plots(rows: list[Row], swept: Sequence[str], plot_dir: Path) -> list[Path]:
    """For each swept parameter, duration and % of roof against it (a sweep that ran no GPU: the interpreter's time
    alone, it has no % of roof): one line per version (and combination of the other swept values), markers by
    bottleneck class."""
    from kbench.report.chart import pyplot, save_png

    plt = pyplot()
    markers = {"Memory": "o", "Compute": "s", "Latency": "^"}
    axis, time = time_axis(rows)
    panels: list[tuple[str, Callable[[Row], float | None]]] = [(axis, time)]
    if axis != INTERPRETED:
        panels.append(("% of roof", lambda r: r.roof_pct))
    written = []
    if plot_dir.is_symlink():  # a resumed sweep folder may be anyone's: pictures land in it, nowhere a link leads
        raise ConfigError(f"{plot_dir} is a symbolic link, which kbench never makes: remove it and resume again")
    plot_dir.mkdir(parents=True, exist_ok=True)
    for along in swept:
        lines = _lines(rows, along, swept)
        if not lines:
            continue
        fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
        for (version, others), line in lines.items():
            label = version + ("" if not others else " (" + ", ".join(f"{n}={v}" for n, v in others) + ")")
            xs = [float(r.params[along]) if _sort_key(r.params[along])[0] == 0 else i for i, r in enumerate(line)]
            for ax, (_, value) in zip(axes[0], panels, strict=True):
                ys = [value(r) for r in line]
                drawn = ax.plot(xs, [y if y is not None else float("nan") for y in ys], label=label)[0]
                for x, y, r in zip(xs, ys, line, strict=True):
                    if y is not None:
                        ax.scatter([x], [y], marker=markers.get(r.bottleneck or "", "x"), color=drawn.get_color())
        for ax, (what, _) in zip(axes[0], panels, strict=True):
            ax.set_xlabel(along)
            ax.set_ylabel(what)
            ax.set_xscale("log", base=2)
            ax.grid(True, alpha=0.3)
        axes[0][0].set_yscale("log")
        axes[0][-1].legend(fontsize=7, title="markers: o Memory, s Compute, ^ Latency", title_fontsize=7)
        fig.tight_layout()
        written.append(save_png(fig, plot_dir / f"{along}.png", dpi=100))
    return written


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
            "% of roof is the stages' roofline bounds (datasheet peaks) over the measured duration; roof (model) is the"
            " roof that bounds the version's own FLOP/byte model (analytic: its intensity against the ridge point);"
            " bottleneck is the measured class (Latency: far from both roofs, report contract section 4).",
            *interpreted(rows),
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
        "These points ran no GPU (access mode): their time is Triton's CPU interpreter's, not GPU time, so TFLOP/s, "
        "GB/s and % of roof are n/a and no version is called fastest; bottleneck is the class predicted for the "
        "device the runs name."
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
