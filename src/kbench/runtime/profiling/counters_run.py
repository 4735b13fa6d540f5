"""From an .ncu-rep to a run folder: grouping kernels into stages, figures, report.md, report-verbose.md,
annotated source and SASS per stage. Shared by the annotation and ncu modes and by `kbench analyze`."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from kbench.analysis import ncu
from kbench.analysis.counters import StageModel, combine, summarize_counters
from kbench.analysis.devices import DeviceTable, load_devices, resolve
from kbench.errors import KbenchError
from kbench.fsutil import safe, write_json_atomic
from kbench.plan.base import KernelPlan
from kbench.report.chart import roofline_png
from kbench.report.models import ProfileResult
from kbench.report.render import render_report, render_verbose
from kbench.runtime import output
from kbench.runtime.profiling.session import analyzed_run

COUNTER_MODES = ("annotation", "ncu")


def group(kernels: list[ncu.Kernel], plan: KernelPlan | None) -> list[tuple[str, list[ncu.Kernel]]]:
    """With a plan: its stages in order, each with the kernels of its NVTX range. Without: one stage per kernel."""
    if plan is None:
        names = [k.name for k in kernels]
        return [(k.name if names.count(k.name) == 1 else f"{k.name}#{k.index}", [k]) for k in kernels]
    stages = [s.name for s in plan.checked_stages()]
    grouped = [(s, [k for k in kernels if ncu.stage_of(k) == s]) for s in stages]
    missing = [s for s, ks in grouped if not ks]
    if missing:
        expected = ", ".join(f"kbench.{s}" for s in missing)
        raise KbenchError(
            f"no profiled kernel lies in NVTX range(s) {expected} (stage(s) {', '.join(missing)}): the ncu "
            "filter matched nothing there, or the report is of another plan"
        )
    return grouped


def build_result(
    rep: Path,
    mode: str,
    plan: KernelPlan | None,
    table: DeviceTable | None = None,
    kernels: list[ncu.Kernel] | None = None,
) -> tuple[ProfileResult, list[tuple[str, list[ncu.Kernel]]]]:
    if mode not in COUNTER_MODES:
        raise KbenchError(f"unknown analysis mode {mode}; choose annotation or ncu")
    kernels = kernels if kernels is not None else ncu.kernels(rep)
    if not kernels:
        raise KbenchError(f"{rep} holds no profiled kernel")
    table = table or load_devices()
    device = resolve(table, kernels[0].device or "unknown device")
    grouped = group(kernels, plan)
    counters = [combine(name, ks) for name, ks in grouped]
    models = (
        {
            s.name: StageModel(flops=s.flops, dram_bytes=s.dram_bytes, precision=s.precision)
            for s in plan.checked_stages()
        }
        if plan
        else {}
    )
    rules = {name: [r for k in ks for r in k.rules] for name, ks in grouped} if mode == "ncu" else None
    figures = summarize_counters(
        counters, models, device.spec.ceilings() if device.spec else {}, roofline_known=device.known, rules=rules
    )
    params: dict[str, Any] = plan.values() if plan else {"report": safe(rep.name), "dtype": "n/a"}
    result = ProfileResult(
        kernel=plan.package if plan else safe(rep.stem),
        version=plan.version if plan else "offline",
        mode=mode,
        params=params,
        device=device.name,
        device_key=device.key,
        figures=figures,
        counters=counters,
        source=rep.name,
        timing_method=f"ncu gpu__time_duration of one profiled launch per kernel ({mode} mode)",
    )
    return result, grouped


def write_outputs(result: ProfileResult, grouped: list[tuple[str, list[ncu.Kernel]]], rep: Path, run_dir: Path) -> None:
    """report.md, result.json, kernels.csv and rules.csv (the tidy tables), and in ncu mode report-verbose.md,
    source/<stage>.md, sass/<stage>-<kernel>.csv."""
    stage_of = {k.index: name for name, ks in grouped for k in ks}
    kernels = [k for _, ks in grouped for k in ks]
    ncu.kernels_frame(kernels, stage_of).to_csv(run_dir / "kernels.csv", index=False)
    ncu.rules_frame(kernels, stage_of).to_csv(run_dir / "rules.csv", index=False)
    if result.mode == "ncu":
        actions = ncu.load_actions(rep)
        stages: list[dict[str, object]] = []
        for name, ks in grouped:
            stages.append(
                {"name": name, "kernels": ks, "metrics": {k.index: ncu.all_metrics(actions[k.index]) for k in ks}}
            )
            _write_source(run_dir, name, [(k, actions[k.index]) for k in ks])
        (run_dir / "report-verbose.md").write_text(render_verbose(result, stages))
    spec = load_devices().devices.get(result.device_key) if result.device_key else None
    if spec is not None and roofline_png(
        result.figures,
        spec.ceilings(),
        run_dir / "roofline.png",
        f"{result.kernel} {result.version} on {spec.display_name}",
    ):
        result.chart = "roofline.png"
    write_json_atomic(run_dir / output.RESULT, result.model_dump(mode="json", exclude={"report_md"}))
    result.report_md = render_report(result)
    (run_dir / "report.md").write_text(result.report_md)


def _write_source(run_dir: Path, stage: str, kernels: list[tuple[ncu.Kernel, Any]]) -> None:
    (run_dir / "source").mkdir(exist_ok=True)
    (run_dir / "sass").mkdir(exist_ok=True)
    lines = [
        f"# Annotated source: stage {stage}",
        "",
        "Each source line with the instructions it executed and the warp-stall samples of its SASS "
        "(ncu source counters), hottest first.",
        "",
    ]
    for k, action in kernels:
        rows = ncu.sass_rows(action)
        with (run_dir / "sass" / f"{safe(stage)}-{k.index}.csv").open("w", newline="") as f:
            writer = csv.DictWriter(
                f, fieldnames=["pc", "file", "line", "sass", "inst_executed", "stall_samples", "top_stall"]
            )
            writer.writeheader()
            writer.writerows(rows)
        src = ncu.annotated_source(action)
        lines += [
            f"## Kernel {k.index}: {k.name}",
            "",
            "| File:line | Instructions executed | Stall samples | Top stall | Source |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {Path(e['file']).name}:{e['line']} | {e['inst_executed']:.0f} | {e['stall_samples']:.0f} | "
            f"{e['top_stall'] or 'n/a'} | `{e['source'].strip().replace('|', '/')}` |"
            for e in src
        ]
        lines.append("")
        if not src:
            lines += ["(no source counters in this report: profile with --prof_type=ncu, which imports the source)", ""]
    (run_dir / "source" / f"{safe(stage)}.md").write_text("\n".join(lines) + "\n")


def analyze(rep: Path, mode: str, out_root: Path, plan: KernelPlan | None) -> ProfileResult:
    """`kbench analyze`: the reports of an existing capture, in a new run folder; no GPU or ncu needed."""
    result, grouped = build_result(rep, mode, plan)
    slug = plan.slug() if plan else safe(rep.stem)
    return analyzed_run(result, rep, out_root, slug, lambda run_dir: write_outputs(result, grouped, rep, run_dir))
