"""Intra mode: inside one kernel, over time. Each stage is timed plain; a stage whose kernel records its tasks
(``Stage.tasks`` and ``Stage.build_intra``, with ``kbench.plan.intra.Profiler``) is timed again recording, and one
recorded launch becomes a task timeline (``intra-<stage>.json``, a Chrome trace for ui.perfetto.dev) and the
report's ``## Inside the kernel``: per task its time across CTAs, CTA time and load imbalance, CTAs per SM, SM busy
time, the idle tail, gaps, the overhead of recording, and any record the buffer could not hold. Stage durations
are the plain CUDA-event medians; no hardware counters (TC%, DRAM%, Occ% n/a)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from kbench.analysis import intra
from kbench.analysis.devices import resolve
from kbench.analysis.figures import Facts, from_timings
from kbench.analysis.timing_stats import TimingStats
from kbench.capture.cupti import REST_X
from kbench.capture.phases import Stopwatch
from kbench.capture.prepare import guarded
from kbench.errors import UsageError
from kbench.fsutil import write_json_atomic
from kbench.modes.base import Analysis, Capture, Context, InProcessMode, Job, prepare_in_process
from kbench.report.mode_sections import Intra as IntraSection
from kbench.report.mode_sections import IntraStage, ModeSections
from kbench.report.models import ProfileResult

RECORD = "intra.json"  # every stage's plain and recording samples, and its trace file


class IntraMode(InProcessMode):
    name = "intra"
    offline_key = "intra"

    def capture(self, job: Job) -> Capture:
        from kbench.capture import intra as ic

        plan, opts = job.plan, job.opts
        if not any(s.build_intra for s in plan.checked_stages()):
            raise UsageError(
                f"{plan.package} {plan.version}: no stage records tasks; give a stage tasks=(names...) and "
                "build_intra=<a build that passes the profiler buffer> (see docs/agents/references/mode-intra.md)"
            )
        job.params.update(bench_runs=opts.bench_runs)
        prep, tiling = prepare_in_process(job, Stopwatch())
        opts.progress(f"timing each stage plain and recording ({opts.bench_runs} repetitions each)")
        with job.env.sampled():
            rest_x = 0.0 if job.env.clocks.locked else REST_X
            record = guarded("(intra)", lambda: ic.measure(prep, opts.bench_runs, job.run_dir, opts.progress, rest_x))
        write_json_atomic(job.run_dir / RECORD, record)
        return Capture(
            files={"intra": job.run_dir / RECORD},
            check=prep.check.line() if prep.check else None,
            tiling=tiling,
        )

    def open(self, path: Path) -> Capture:
        return Capture(files={"intra": path}, live=False)

    def analyse(self, capture: Capture, ctx: Context) -> Analysis:
        if ctx.plan is None:
            raise ValueError("intra mode analyses its record against a plan")
        device = ctx.device or resolve(ctx.table, "unknown device")
        folder = capture.files["intra"].parent
        record = json.loads(capture.files["intra"].read_text())
        sm_count = device.spec.sm_count if device.spec else None
        stages = [_stage(name, s, folder, sm_count) for name, s in record["stages"].items()]
        measured = {
            s.name: {
                "tail_idle_pct": s.analysis.tail_idle_pct,
                "cta_imbalance": s.analysis.imbalance,
                "longest_programs": s.analysis.longest_words(),
            }
            for s in stages
            if s.analysis is not None
        }
        facts = Facts.of(device, capture.tiling, capture.predicted).measured_by(measured)
        figures = from_timings(
            ctx.plan.checked_stages(),
            {s.name: TimingStats.of(record["stages"][s.name]["plain_us"]) for s in stages},
            device.ceilings(),
            roofline_known=device.known,
            device_name=device.name,
            facts=facts,
        )
        method = next(iter(record["stages"].values()))["method"]
        notes = [
            f"recording the tasks of {s.name} cost {s.overhead_pct:+.1f}% ({s.recording_us:.2f} against "
            f"{s.plain_us:.2f} us, medians of {record['reps']})"
            for s in stages
            if s.overhead_pct is not None and s.recording_us is not None
        ]
        notes += [f"stage {s.name} records no tasks: timed plain only" for s in stages if not s.tasks]
        notes += [
            f"the recording launch of {s.name} wrote a different output than the plain one"
            for s in stages
            if s.same_output is False
        ]
        return Analysis(
            device=device,
            figures=figures,
            timing_method=f"{method}; stage durations from the plain (not recording) launches",
            sections=ModeSections(intra=IntraSection(reps=int(record["reps"]), stages=stages)),
            notes=notes,
        )

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None:
        pass  # intra.json and the traces are written by the capture


def _stage(name: str, s: dict[str, Any], folder: Path, sm_count: int | None) -> IntraStage:
    """A stage's record, with its trace read back from the run folder and analysed."""
    plain = statistics.median(s["plain_us"])
    recording = statistics.median(s["instrumented_us"]) if s.get("instrumented_us") else None
    tasks = s.get("tasks", [])
    if not s.get("trace"):
        return IntraStage(name=name, tasks=tasks, plain_us=plain, recording_us=recording)
    path = folder / s["trace"]
    trace = json.loads(path.read_text())  # kbench's own export: a Chrome trace with otherData
    meta = trace.get("otherData", {})
    return IntraStage(
        name=name,
        tasks=tasks,
        plain_us=plain,
        recording_us=recording,
        trace=s["trace"],
        analysis=intra.analyse(intra.trace_records(trace, str(path)), sm_count),
        timer_step_ns=meta.get("timer_step_ns"),
        dropped_records=int(meta.get("dropped_records", 0)),
        overflows=[{k: int(v) for k, v in o.items()} for o in s.get("overflows", [])],
        unpaired_records=int(meta.get("unpaired_records", 0)),
        same_output=s.get("same_output"),
    )


INTRA = IntraMode()
