"""The jinja2 environment (StrictUndefined) and the writers of report.md."""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace
from typing import Any

import jinja2

from kbench.report.models import ProfileResult


def num(value: float | None, digits: int = 2) -> str:
    """A number with fixed decimals, or n/a when it was not measured."""
    return "n/a" if value is None else f"{value:.{digits}f}"


def sci(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3e}"


def cell(text: object) -> str:
    """Text safe inside a markdown table cell."""
    return str(text).replace("|", "/").replace("\n", " ")


def opt(value: object) -> str:
    """A value as text, n/a when absent (empty sequences included)."""
    if value is None or value == [] or value == {}:
        return "n/a"
    return cell(", ".join(str(v) for v in value) if isinstance(value, list | tuple) else value)


def pairs(mapping: dict[str, object] | None) -> str:
    if not mapping:
        return "n/a"
    return cell(", ".join(f"{k}={'n/a' if v is None else v}" for k, v in mapping.items()))


def focus(items: list[tuple[str, object]]) -> str:
    return cell(", ".join(f"{n}={v}" for n, v in items))


@cache
def environment() -> jinja2.Environment:
    """Compiled once per process and kept in memory only: jinja2 reads its on-disk bytecode cache with pickle and
    marshal, and a cache folder a checked-out repo or another user can write would run their code here."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kbench.report", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(num=num, sci=sci, cell=cell, opt=opt, pairs=pairs, focus=focus)
    return env


def render_report(result: ProfileResult) -> str:
    return environment().get_template("report.md.j2").render(r=result, f=result.figures)


def render_verbose(result: ProfileResult, stages: list[dict[str, object]]) -> str:
    """report-verbose.md: ``stages`` = [{"name", "kernels": [Kernel], "metrics": {kernel index: [(name, value)]}}]."""
    return environment().get_template("report-verbose.md.j2").render(r=result, stages=stages)


def render_timeline_only(analysis: Any, capture: str, why: str, picture: Any) -> str:
    """timeline.md: an offline timeline's Timeline section under a head saying what it decided and what not."""
    section = environment().get_template("sections/timeline.md.j2")
    timeline = SimpleNamespace(analysis=analysis, capture=capture, picture=picture)
    r = SimpleNamespace(sections=SimpleNamespace(timeline=timeline))
    busy = 100.0 - analysis.idle_pct
    head = "\n".join(
        [
            "# Timeline (no report.md)",
            "",
            f"Decided: the GPU was busy {busy:.1f}% of the analysed window (idle {analysis.idle_pct:.1f}%), so the"
            " plan is not latency-bound by idle time; the stages' spans, their overlap and the idle gaps are below.",
            f"Not decided: memory- or compute-bound. {why[0].upper() + why[1:]}: that needs a FLOP/byte model"
            " (`kbench analyze <capture> --plan <kernel_package> [<version>] --<param>=<value>`) or counters"
            " (`--prof_type=annotation`). report.md, whose Bottleneck line must name a class, is not written.",
            "",
        ]
    )
    return head + "\n" + section.render(r=r)
