"""Event mode: each stage and the whole plan timed with CUDA events in this process; no hardware counters (TC%,
DRAM%, Occ% n/a). The capture is ``timings.json`` (every sample) and, on a device conf/devices.json does not
know, ``ceilings.json`` (copy bandwidth and matmul rate measured on it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbench.analysis.devices import resolve
from kbench.analysis.figures import Facts, from_timings
from kbench.analysis.roofline import Ceilings
from kbench.analysis.timing_stats import TimingStats
from kbench.capture.artifacts import write_stage
from kbench.capture.prepare import checked, guarded, prepare_on_gpu
from kbench.capture.timing import time_cuda
from kbench.fsutil import write_json_atomic
from kbench.modes.base import Analysis, Capture, Context, Job, RunOptions
from kbench.plan.base import KernelPlan
from kbench.report.models import ProfileResult, Sections, Timing

TIMINGS = "timings.json"
CEILINGS = "ceilings.json"


def concurrency(plan: KernelPlan) -> str | None:
    """What event mode can and cannot say about a plan on several streams."""
    if not plan.concurrent():
        return None
    streams = len({s.stream for s in plan.checked_stages()})
    return (
        f"This plan runs its stages concurrently on {streams} streams: event mode times each stage alone and "
        "the whole plan end to end (the whole-plan row), and cannot say how the stages overlapped; "
        "--prof_type=nsys shows the overlap, idle gaps and launch order."
    )


class Event:
    name = "event"
    options = frozenset({"cuda_graph"})
    suffixes: tuple[str, ...] = ()
    describes = ""
    offline_key = "timings"
    default_bench_runs = 100

    def tools(self, opts: RunOptions) -> dict[str, Any]:
        return {}

    def capture(self, job: Job) -> Capture:
        plan, opts = job.plan, job.opts
        job.params.update(bench_runs=opts.bench_runs, cuda_graph=opts.cuda_graph)
        opts.progress(f"{plan.package} {plan.version}: allocating, autotuning, compiling")
        prep = prepare_on_gpu(plan, job.device, job.seed)
        if opts.check:
            opts.progress("checking correctness against the reference")
            job.params["correctness"] = checked(prep).line()
        tiling = {ps.stage.name: write_stage(job.run_dir, ps) for ps in prep.stages}
        opts.progress(f"measuring (event mode, {opts.bench_runs} repetitions per stage)")

        def measure() -> dict[str, Any]:
            stages = {
                ps.stage.name: time_cuda(ps.launch.fn, opts.bench_runs, cuda_graph=opts.cuda_graph)
                for ps in prep.stages
            }
            whole = time_cuda(prep.run_all, opts.bench_runs, cuda_graph=opts.cuda_graph)
            return {
                "method": whole.method,
                "stages": {k: {"samples_us": v.us, "warmup_reps": v.warmup_reps} for k, v in stages.items()},
                "plan": {"samples_us": whole.us, "warmup_reps": whole.warmup_reps},
            }

        with job.env.sampled():
            timings = guarded("(measurement)", measure)
        write_json_atomic(job.run_dir / TIMINGS, timings)  # the raw samples, kept before any analysis
        if job.device.spec is None:
            from kbench.capture import ceilings as measured

            opts.progress(f"{job.device.name} is not in conf/devices.json: measuring copy bandwidth and matmul rate")
            found = guarded(
                "(ceiling measurement)", lambda: measured.measure({s.precision for s in plan.checked_stages()})
            )
            write_json_atomic(job.run_dir / CEILINGS, {p: vars(c) for p, c in found.items()})
        files = {"timings": job.run_dir / TIMINGS}
        if (job.run_dir / CEILINGS).exists():
            files["ceilings"] = job.run_dir / CEILINGS
        return Capture(files=files, check=prep.check.line() if prep.check else None, tiling=tiling)

    def open(self, path: Path) -> Capture:
        return Capture(files={"timings": path}, live=False)

    def analyse(self, capture: Capture, ctx: Context) -> Analysis:
        if ctx.plan is None:
            raise ValueError("event mode analyses timings against a plan")
        device = ctx.device or resolve(ctx.table, "unknown device")
        timings = json.loads(capture.files["timings"].read_text())
        if "ceilings" in capture.files:
            found = json.loads(capture.files["ceilings"].read_text())
            ceilings = {p: Ceilings(**c) for p, c in found.items()}
        else:
            ceilings = device.spec.ceilings() if device.spec else {}
        stats = {name: TimingStats.of(s["samples_us"]) for name, s in timings["stages"].items()}
        figures = from_timings(
            ctx.plan.checked_stages(),
            stats,
            ceilings,
            roofline_known=device.known,
            device_name=device.name,
            facts=Facts.of(device, capture.tiling),
        )
        whole = timings.get("plan")
        return Analysis(
            device=device,
            figures=figures,
            timing_method=timings["method"],
            plan_timing=TimingStats.of(whole["samples_us"]) if whole else None,
            sections=Sections(timing=Timing(concurrency=concurrency(ctx.plan))),
        )

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None:
        pass  # timings.json is written by the capture


EVENT = Event()
