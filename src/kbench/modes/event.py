"""Event mode: each stage and the whole plan timed with CUDA events in this process; no hardware counters (TC%,
DRAM%, Occ% n/a). The capture is ``timings.json`` (every sample) and, on a device conf/devices.json does not
know, ``ceilings.json`` (copy bandwidth and matmul rate measured on it)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kbench.analysis import lines, sampling
from kbench.analysis.audit import cross_check
from kbench.analysis.census import stage_kernels
from kbench.analysis.clocks import probed, sagged, start_mhz, window
from kbench.analysis.devices import resolve
from kbench.analysis.figures import Facts, from_timings
from kbench.analysis.kernels import StageKernels
from kbench.analysis.roofline import Ceilings
from kbench.analysis.timing_stats import TimingStats
from kbench.capture.census import RUNS as CENSUS_RUNS
from kbench.capture.census import census
from kbench.capture.cupti import REST_X, Repetitions, after_events, time_cupti, work_items
from kbench.capture.phases import Stopwatch, describe
from kbench.capture.prepare import guarded
from kbench.capture.sampling import Sampler, reps_for
from kbench.capture.sampling import start as start_sampling
from kbench.capture.sampling import wanted as sampling_wanted
from kbench.capture.timing import L2Flush, l2_flush_bytes, time_cuda
from kbench.fsutil import write_json_atomic
from kbench.modes.base import Analysis, Capture, Context, InProcessMode, Job, prepare_in_process
from kbench.plan.base import KernelPlan
from kbench.report.lines import write as write_lines
from kbench.report.models import ProfileResult
from kbench.report.sections import Sections, Timing

TIMINGS = "timings.json"
CEILINGS = "ceilings.json"
KERNELS = "kernels.json"  # the census of each stage's kernels (kbench.capture.census), raw facts
SAMPLES = "samples.json"  # each stage's PM-sampling round (kbench.capture.sampling), raw samples and kernel records
NO_CENSUS_GRAPH = (
    "--cuda-graph: the stage is timed as graph replays, which make no launches or API calls of their own, and "
    "CUPTI does not time it (no kernel sum to set the events against)"
)
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


def census_kernels(
    capture: Capture, plan: KernelPlan, timed: dict[str, Any]
) -> tuple[dict[str, StageKernels], list[str]]:
    """Each stage's kernels from the capture's census (with its host time from ``timed``'s CUDA-event and CUPTI
    samples), and a note for each stage the census could not measure."""
    if "kernels" not in capture.files:
        return {}, []
    found = json.loads(capture.files["kernels"].read_text())
    out: dict[str, StageKernels] = {}
    notes = []
    for stage in plan.checked_stages():
        record = found.get("stages", {}).get(stage.name)
        if record is None:
            continue
        if "not_measured" in record:
            notes.append(f"Kernels of {stage.name} not measured: {record['not_measured']}")
            continue
        t = timed.get(stage.name, {})
        out[stage.name] = stage_kernels(stage.name, record, stage.kernels, t.get("samples_us"), t.get("cupti_us"))
    return out, notes


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
        taken: dict[str, Any] = {}  # per stage: its census record, or {"not_measured": why}
        sampled: dict[str, Any] = {}  # samples.json: the sampler, or why there is none, and each stage's round

        def measure() -> dict[str, Any]:
            flush = L2Flush(l2_flush_bytes())
            timed, flush_items = timings_of(flush)
            # after every timing (the collector is enabled only now): each stage's counters, in a round of its own
            with watch.phase("PM sampling"):
                sampler = start_sampling()
                if sampler is None:  # not attempted (a replay of a run that recorded no sampling)
                    return timed
                if not isinstance(sampler, Sampler):
                    sampled["not_available"] = sampler
                    return timed
                sampled["sampler"] = sampler.describe()
                try:
                    for ps in prep.stages:
                        t = timed["stages"][ps.stage.name]
                        reps = reps_for(min(t["cupti_us"] or t["samples_us"]), opts.bench_runs, sampler.interval)
                        got = sampler.round(ps.launch.fn, reps, flush, flush_items)
                        sampled.setdefault("stages", {})[ps.stage.name] = (
                            got if isinstance(got, dict) else {"not_measured": got}
                        )
                finally:
                    sampler.close()
            return timed

        def timings_of(flush: L2Flush) -> tuple[dict[str, Any], int]:
            stages: dict[str, Any] = {}
            rest_x = 0.0 if job.env.clocks.locked else REST_X
            with watch.phase("CUPTI timing"):
                # the CUPTI timing's and the sampling round's cut (a CUDA-graph run without sampling needs neither)
                flush_items = work_items(flush) if not opts.cuda_graph or sampling_wanted() else 0
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
                # after the timings, so it cannot disturb them: the kernels, their launch facts and API calls
                with watch.phase("kernel census"):
                    found = census(ps.launch.fn) if not opts.cuda_graph else NO_CENSUS_GRAPH
                if found is not None:  # None: a replayed capture that recorded no census (tests/pipeline_fakes.py)
                    taken[ps.stage.name] = found if isinstance(found, dict) else {"not_measured": found}
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
            }, flush_items

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
        if sampled:
            sampled["seconds"] = round(watch.seconds.get("PM sampling", 0.0), 3)
            write_json_atomic(job.run_dir / SAMPLES, sampled)
        if taken:
            seconds = round(watch.seconds.get("kernel census", 0.0), 3)
            write_json_atomic(job.run_dir / KERNELS, {"runs": CENSUS_RUNS, "seconds": seconds, "stages": taken})
        if job.device.spec is None:
            from kbench.capture import ceilings as measured

            opts.progress(f"{job.device.name} is not in conf/devices.json: measuring copy bandwidth and matmul rate")
            with watch.phase("ceiling measurement"):
                found = guarded(
                    "(ceiling measurement)", lambda: measured.measure({s.precision for s in plan.checked_stages()})
                )
            write_json_atomic(job.run_dir / CEILINGS, {p: vars(c) for p, c in found.items()})
        files = {"timings": job.run_dir / TIMINGS}
        for role, name in (("ceilings", CEILINGS), ("kernels", KERNELS), ("samples", SAMPLES)):
            if (job.run_dir / name).exists():
                files[role] = job.run_dir / name
        job.params["phases_s"] = {k: round(v, 2) for k, v in watch.seconds.items()}
        return Capture(
            files=files,
            check=prep.check.line() if prep.check else None,
            tiling=tiling,
            facts={"phases": watch.seconds},
        )

    def open(self, path: Path) -> Capture:
        # the census and the sampling round a live run wrote next to its timings
        beside = {role: path.parent / name for role, name in (("kernels", KERNELS), ("samples", SAMPLES))}
        return Capture(files={"timings": path, **{r: p for r, p in beside.items() if p.exists()}}, live=False)

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
        kernels, unmeasured = census_kernels(capture, ctx.plan, timings["stages"])
        # the compiled kernels' static per-line mix, where the run folder kept them (compiled/<stage>/)
        compiled = capture.files["timings"].parent / "compiled"
        static = {s.name: lines.compiled(compiled / s.name) for s in ctx.plan.checked_stages()}
        found = json.loads(capture.files["samples"].read_text()) if "samples" in capture.files else {}
        sampled, sampling_notes = sampling.read(found) if found else ({}, [])
        spec = device.spec
        peak = next((c.gbps for c in ceilings.values()), None)  # the datasheet's where the device is known
        kernels = {
            n: sampling.kernel_bytes(sampled[n], ks, peak) if n in sampled and peak else ks for n, ks in kernels.items()
        }
        counted = {
            name: sampling.evidence(
                s,
                spec.sm_count if spec else None,
                (timings["stages"][name].get("clock") or {}).get("sm_mhz"),
                stats[name].median_us,
                spec.limits.issue_per_clock if spec and spec.limits else None,
            )
            for name, s in sampled.items()
        }
        figures = from_timings(
            ctx.plan.checked_stages(),
            stats,
            ceilings,
            roofline_known=device.known,
            device_name=device.name,
            facts=Facts.of(device, capture.tiling, capture.predicted, kernels=kernels, lines=static, sampled=counted),
            sampled={
                n: (s, sampling.sampled_by(s, found.get("sampler", {}).get("metrics", {}))) for n, s in sampled.items()
            },
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
                *unmeasured,
                *sampling_notes,
                # where the time went, for a capture long enough to ask (a second or more)
                *([describe(phases)] if sum((phases := capture.facts.get("phases") or {}).values()) >= 1 else []),
            ],
            plan_timing=TimingStats.of(whole["samples_us"]) if whole else None,
            sections=Sections(
                timing=Timing(
                    concurrency=concurrency(ctx.plan),
                    sampled=list(sampled.values()) or None,
                    sampler=found.get("sampler") if sampled else None,
                )
            ),
            data=static,
        )

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None:
        """lines/<stage>.md: the compiled kernels' static per-line mix (timings.json is written by the capture)."""
        for stage, models in (analysis.data or {}).items():
            if models:
                write_lines(run_dir, "lines", stage, models)


EVENT = Event()
