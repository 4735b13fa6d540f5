"""From a timeline capture (nsys SQLite export or PyTorch-profiler trace) to a run folder: the analyses,
report.md with its ``## Timeline`` section, the CSV tables and a Chrome trace. Shared by nsys mode and by
`kbench analyze`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from kbench.analysis import timeline as tl
from kbench.analysis import timeline_stages as ts
from kbench.analysis.devices import DeviceTable, load_devices, resolve
from kbench.fsutil import safe, write_json_atomic
from kbench.plan.base import KernelPlan
from kbench.report.models import ProfileResult
from kbench.report.render import render_report
from kbench.report.trace import chrome_trace
from kbench.runtime import output
from kbench.runtime.profiling.session import analyzed_run

MODE = "nsys"
TRACE = "trace.json"


def build_result(
    capture: Path, plan: KernelPlan | None, device_name: str | None = None, table: DeviceTable | None = None
) -> tuple[ProfileResult, pd.DataFrame]:
    """The result of a capture; ``device_name`` overrides the device the capture names (a live run knows it)."""
    frame = tl.load(capture)
    stages = plan.checked_stages() if plan else None
    specs = [ts.StageSpec(s.name, s.stream, tuple(s.after)) for s in stages] if stages else None
    analysis = ts.analyze(frame, ts.backend_of(capture.suffix), capture.name, specs)
    device = resolve(table or load_devices(), device_name or tl.device_name(capture) or "unknown device")
    figures = ts.figures(
        analysis,
        stages,
        device.spec.ceilings() if device.spec else {},
        roofline_known=device.known,
        device_name=device.name,
    )
    result = ProfileResult(
        kernel=plan.package if plan else safe(capture.stem),
        version=plan.version if plan else "offline",
        mode=MODE,
        params=plan.values() if plan else {"capture": safe(capture.name), "dtype": "n/a"},
        device=device.name,
        device_key=device.key,
        figures=figures,
        plan_timing=analysis.span_us,
        timing_method=(
            f"{analysis.backend} timeline: each stage's duration is the median over {len(analysis.windows)} "
            "window(s) of the span from its first GPU start to its last GPU end"
        ),
        source=capture.name,
        timeline=analysis,
        capture=f"{analysis.backend} (`{capture.name}`)",
    )
    return result, frame


def write_outputs(result: ProfileResult, frame: pd.DataFrame, run_dir: Path) -> None:
    """report.md, result.json, timeline.csv (the normalized table), one CSV per analysis, trace.json."""
    assert result.timeline is not None
    frame.to_csv(run_dir / "timeline.csv", index=False)
    for name, table in ts.frames(result.timeline).items():
        table.to_csv(run_dir / f"{name}.csv", index=False)
    (run_dir / TRACE).write_text(json.dumps(chrome_trace(frame)))
    write_json_atomic(
        run_dir / output.RESULT,
        result.model_dump(mode="json", exclude={"report_md": True, "timeline": {"occurrences"}}),
    )
    result.report_md = render_report(result)
    (run_dir / "report.md").write_text(result.report_md)


def analyze(capture: Path, out_root: Path, plan: KernelPlan | None) -> ProfileResult:
    """`kbench analyze <capture.sqlite | trace.json>`: the nsys-mode reports of an existing capture."""
    result, frame = build_result(capture, plan)
    slug = plan.slug() if plan else safe(capture.stem)
    return analyzed_run(result, capture, out_root, slug, lambda run_dir: write_outputs(result, frame, run_dir))
