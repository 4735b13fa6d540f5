"""Event mode: each stage and the whole plan timed with CUDA events in this process; no hardware counters (TC%,
DRAM%, Occ% n/a). The capture is ``timings.json`` (every sample) and, on a device conf/devices.json does not
know, ``ceilings.json`` (copy bandwidth and matmul rate measured on it)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kbench.analysis import lines
from kbench.analysis.audit import cross_check
from kbench.analysis.clocks import probed, sagged, start_mhz, window
from kbench.analysis.devices import resolve
from kbench.analysis.figures import Facts, from_timings
from kbench.analysis.roofline import Ceilings
from kbench.analysis.timing_stats import TimingStats
from kbench.capture.cupti import REST_X, Repetitions, after_events, time_cupti, work_items
from kbench.capture.phases import Stopwatch, describe
from kbench.capture.prepare import guarded
from kbench.capture.timing import L2Flush, l2_flush_bytes, time_cuda
from kbench.fsutil import write_json_atomic
from kbench.modes.base import Analysis, Capture, Context, InProcessMode, Job, prepare_in_process
from kbench.plan.base import KernelPlan
from kbench.report.lines import write as write_lines
from kbench.report.models import ProfileResult
from kbench.report.sections import Sections, Timing

TIMINGS = "timings.json"
CEILINGS = "ceilings.json"
CUPTI_METHOD = (
    "stage durations from CUPTI (the GPU's timestamps of each repetition's kernels, summed; PyTorch profiler), "
    "{flush} before each{rest}, the SM clock read on the GPU around each (a probe of two spins of known cycles); "
    "CUDA events kept as a cross-check and for the whole plan"
)
REST = (
    ", then the GPU resting {x:g}x the stage's duration (clocks not locked: keeps the power limiter from pulling them; "
    "before the first, {x:g}x the CUDA-event repetitions' time, which ran without rests)"
)


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


class Event(InProcessMode):
    name = "event"
    options = frozenset({"cuda_graph"})
    offline_key = "timings"

    def capture(self, job: Job) -> Capture:
        plan, opts = job.plan, job.opts
        job.params.update(bench_runs=opts.bench_runs, cuda_graph=opts.cuda_graph)
        watch = Stopwatch()
        prep, tiling = prepare_in_process(job, watch)
        opts.progress(f"measuring (event mode, {opts.bench_runs} repetitions per stage)")

        # when each stage was timed (CUDA events, then CUPTI), to place the clock samples
        windows: dict[str, tuple[float, float, float]] = {}

        def measure() -> dict[str, Any]:
            stages: dict[str, Any] = {}
            flush = L2Flush(l2_flush_bytes())
            rest_x = 0.0 if job.env.clocks.locked else REST_X
            with watch.phase("CUPTI timing"):
                flush_items = work_items(flush) if not opts.cuda_graph else 0
            for ps in prep.stages:
                start = time.monotonic()
                with watch.phase("CUDA-event timing"):
                    events = time_cuda(ps.launch.fn, opts.bench_runs, cuda_graph=opts.cuda_graph)
                middle = time.monotonic()
                # the GPU's own timestamps for the same launches (not for CUDA-graph replays: events time those)
                with watch.phase("CUPTI timing"):
                    cupti = (
                        time_cupti(
                            ps.launch.fn,
                            opts.bench_runs,
                            flush,
                            flush_items,
                            **after_events(events.us, rest_x),
                        )
                        if not opts.cuda_graph
                        else "--cuda-graph: the stage is timed as a graph replay with CUDA events"
                    )
                windows[ps.stage.name] = (start, middle, time.monotonic())
                stages[ps.stage.name] = {
                    "samples_us": events.us,
                    "warmup_reps": events.warmup_reps,
                    "cupti_us": cupti.us if isinstance(cupti, Repetitions) else None,
                    "cupti_sm_mhz": cupti.sm_mhz if isinstance(cupti, Repetitions) else None,
                    "cupti_note": cupti if isinstance(cupti, str) else None,
                }
            with watch.phase("CUDA-event timing"):
                whole = time_cuda(prep.run_all, opts.bench_runs, cuda_graph=opts.cuda_graph)
            return {
                "method": whole.method,
                "cupti_method": CUPTI_METHOD.format(flush=flush.words, rest=REST.format(x=rest_x) if rest_x else ""),
                "cupti_rest_x": rest_x,
                "stages": stages,
                "plan": {"samples_us": whole.us, "warmup_reps": whole.warmup_reps},
            }

        with job.env.sampled():
            timings = guarded("(measurement)", measure)
        samples = job.env.samples
        timings["start_sm_mhz"] = start_mhz(samples)
        for name, (start, middle, end) in windows.items():
            timed = timings["stages"][name]
            # the clock of the figure the stage's duration comes from (CUPTI's, else the events'), and the events'
            timed["events_clock"] = window(samples, start, middle)
            timed["clock"] = (
                probed(timed.get("cupti_sm_mhz"), window(samples, middle, end))
                if timed["cupti_us"]
                else timed["events_clock"]
            )
        write_json_atomic(job.run_dir / TIMINGS, timings)  # the raw samples, kept before any analysis
        if job.device.spec is None:
            from kbench.capture import ceilings as measured

            opts.progress(f"{job.device.name} is not in conf/devices.json: measuring copy bandwidth and matmul rate")
            with watch.phase("ceiling measurement"):
                found = guarded(
                    "(ceiling measurement)", lambda: measured.measure({s.precision for s in plan.checked_stages()})
                )
            write_json_atomic(job.run_dir / CEILINGS, {p: vars(c) for p, c in found.items()})
        files = {"timings": job.run_dir / TIMINGS}
        if (job.run_dir / CEILINGS).exists():
            files["ceilings"] = job.run_dir / CEILINGS
        job.params["phases_s"] = {k: round(v, 2) for k, v in watch.seconds.items()}
        return Capture(
            files=files,
            check=prep.check.line() if prep.check else None,
            tiling=tiling,
            facts={"phases": watch.seconds},
        )

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
            ceilings = device.ceilings()
        # a stage's duration: its CUPTI samples where they were taken, else its CUDA-event samples
        stats = {name: TimingStats.of(s.get("cupti_us") or s["samples_us"]) for name, s in timings["stages"].items()}
        # the compiled kernels' static per-line mix, where the run folder kept them (compiled/<stage>/)
        compiled = capture.files["timings"].parent / "compiled"
        static = {s.name: lines.compiled(compiled / s.name) for s in ctx.plan.checked_stages()}
        figures = from_timings(
            ctx.plan.checked_stages(),
            stats,
            ceilings,
            roofline_known=device.known,
            device_name=device.name,
            facts=Facts.of(device, capture.tiling, capture.predicted).measured_by(
                {name: {"lines": ms[0]} for name, ms in static.items() if ms}
            ),
        )
        whole = timings.get("plan")
        method = timings["method"]
        if any(s.get("cupti_us") for s in timings["stages"].values()):
            method = f"{timings['cupti_method']}; whole plan and cross-check: {method}"
        return Analysis(
            device=device,
            figures=figures,
            timing_method=method,
            notes=[
                *cross_check(timings["stages"]),
                *[
                    note
                    for name, st in timings["stages"].items()
                    if (note := sagged(name, st.get("clock"), timings.get("start_sm_mhz")))
                ],
                # where the time went, for a capture long enough to ask (a second or more)
                *([describe(phases)] if sum((phases := capture.facts.get("phases") or {}).values()) >= 1 else []),
            ],
            plan_timing=TimingStats.of(whole["samples_us"]) if whole else None,
            sections=Sections(timing=Timing(concurrency=concurrency(ctx.plan))),
            data=static,
        )

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None:
        """lines/<stage>.md: the compiled kernels' static per-line mix (timings.json is written by the capture)."""
        for stage, models in (analysis.data or {}).items():
            if models:
                write_lines(run_dir, "lines", stage, models)


EVENT = Event()
