"""Proton mode: Triton's own profiler (CUPTI backend, its launch hook) around each stage's repetitions, in this
process; the profile (``proton.hatchet``) is read through Triton's viewer into a hatchet GraphFrame. Stage
durations are Proton's per-launch means (it keeps sums, not samples); its overhead is the same repetitions timed
with CUDA events inside and outside the session. No hardware counters (TC%, DRAM%, Occ% n/a)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbench.analysis import proton as pa
from kbench.analysis.devices import resolve
from kbench.analysis.figures import Facts, from_timings
from kbench.analysis.timing_stats import TimingStats
from kbench.capture.phases import Stopwatch
from kbench.capture.prepare import guarded
from kbench.errors import KbenchError, UsageError
from kbench.fsutil import write_json_atomic, write_text_atomic
from kbench.modes.base import Analysis, Capture, Context, InProcessMode, Job, prepare_in_process
from kbench.report import folder
from kbench.report.mode_sections import ModeSections, PcSampling, SampledStage
from kbench.report.models import ProfileResult

PROFILE = "proton"  # proton.hatchet
LOOPS = "proton.json"  # the repetitions' times inside and outside the session
TREE = "proton-tree.txt"
METHOD = (
    "Proton (Triton's profiler, CUPTI backend, hook=triton): each stage's repetitions in a scope named after it, "
    "the stage's duration its kernels' GPU time summed by Proton over their launches ({launches} per kernel), a "
    "mean: Proton keeps sums, not samples, so the spread and percentiles are n/a in effect (one value); the "
    "repetitions run back to back with no L2 flush between them, so a small stage's inputs may still be in L2"
)


class Proton(InProcessMode):
    name = "proton"
    options: frozenset[str] = frozenset({"pc_sampling"})
    suffixes: tuple[str, ...] = (pa.HATCHET,)
    describes = "Proton profiles (.hatchet)"
    offline_key = "proton"

    def capture(self, job: Job) -> Capture:
        from kbench.capture import proton as pc

        opts = job.opts
        job.params.update(bench_runs=opts.bench_runs, pc_sampling=opts.pc_sampling)
        prep, tiling = prepare_in_process(job, Stopwatch())
        sampling = ", sampling PCs" if opts.pc_sampling else ""
        opts.progress(f"profiling with Proton ({opts.bench_runs} repetitions per stage, and as many untimed{sampling})")
        with job.env.sampled():
            loops = guarded(
                "(Proton)", lambda: pc.profile(prep.stages, opts.bench_runs, job.run_dir / PROFILE, opts.pc_sampling)
            )
        write_json_atomic(job.run_dir / LOOPS, loops)
        hatchet = job.run_dir / f"{PROFILE}{pa.HATCHET}"
        if not hatchet.is_file():
            raise KbenchError(f"Proton wrote no profile ({hatchet.name} missing in {job.run_dir})")
        return Capture(
            files={"proton": hatchet, "loops": job.run_dir / LOOPS},
            check=prep.check.line() if prep.check else None,
            tiling=tiling,
        )

    def open(self, path: Path) -> Capture:
        files = {"proton": path}
        if (path.parent / LOOPS).is_file():
            files["loops"] = path.parent / LOOPS
        return Capture(files=files, live=False)

    def analyse(self, capture: Capture, ctx: Context) -> Analysis:
        if ctx.plan is None:  # a needed input missing: bad input, as a missing argument is
            raise UsageError(
                "a Proton profile is read against its plan (the scopes are the plan's stages): pass --plan "
                "<kernel_package> [<version>] --<param>=<value>"
            )
        profile = pa.load(capture.files["proton"])
        device = ctx.device or resolve(ctx.table, _device_name(capture.files["proton"]))
        stats, launches = {}, set()
        for stage in ctx.plan.checked_stages():
            scope = profile.scope(stage.name)
            if scope is None or scope.mean_us is None:
                found = ", ".join(s.name for s in profile.scopes) or "none"
                raise KbenchError(
                    f"the Proton profile has no kernel time in a scope named {stage.name} (scopes: {found})"
                )
            stats[stage.name] = TimingStats.of([scope.mean_us])
            launches.add(scope.repetitions)
        figures = from_timings(
            ctx.plan.checked_stages(),
            stats,
            device.ceilings(),
            roofline_known=device.known,
            device_name=device.name,
            facts=Facts.of(device, capture.tiling, capture.predicted).measured_by(_stall_evidence(profile)),
        )
        sampled = [_sampled(s) for s in profile.scopes if s.lines]
        notes = (
            []
            if sampled
            else ["no PC sampling in this profile (--pc-sampling adds it: stall reasons per source line, at its cost)"]
        )
        if "loops" in capture.files:
            loops = json.loads(capture.files["loops"].read_text())
            for name, t in loops["stages"].items():
                if t.get("plain_us") and t.get("profiled_us"):
                    notes.append(
                        f"Proton's overhead on {name}: {pa.overhead_pct(t['plain_us'], t['profiled_us']):+.1f}% "
                        f"({loops['reps']} repetitions back to back inside the session against the same outside it, "
                        f"CUDA events: {t['profiled_us']:.1f} vs {t['plain_us']:.1f} us)"
                    )
        return Analysis(
            device=device,
            figures=figures,
            timing_method=METHOD.format(launches="/".join(str(n) for n in sorted(launches))),
            sections=ModeSections(pc_sampling=PcSampling(stages=sampled) if sampled else None),
            notes=notes,
            data=profile,
        )

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None:
        """proton-tree.txt: the call-path tree Proton's viewer reads (scopes, kernels, GPU time in ns)."""
        profile: pa.ProtonProfile = analysis.data
        write_text_atomic(run_dir / TREE, profile.tree)


HOT_LINES = 5


def _sampled(scope: pa.ScopeTime) -> SampledStage:
    return SampledStage(
        stage=scope.name,
        samples=sum(x.samples for x in scope.lines),
        stalled=sum(x.stalled for x in scope.lines),
        reasons=scope.stalls(),
        lines=scope.hottest(HOT_LINES),
    )


def _stall_evidence(profile: pa.ProtonProfile) -> dict[str, dict[str, Any]]:
    """For Top 3's catalogue: each sampled stage's stalled samples per reason and its hottest lines."""
    out: dict[str, dict[str, Any]] = {}
    for scope in profile.scopes:
        if not scope.lines:
            continue
        hot = scope.hottest(2)
        out[scope.name] = {
            "stalls": {r: float(n) for r, n in scope.stalls().items() if r != "selected"},  # selected: issuing
            "stall_unit": "PC samples",
            "hot_lines": tuple(f"{Path(x.where).name} ({x.samples} samples, most {x.top_reason})" for x in hot),
        }
    return out


def _device_name(profile: Path) -> str:
    """The GPU a kbench-made profile came from (params.json beside it); Proton's own record has no name."""
    device = folder.made_with(profile).get("device")
    return str(device["name"]) if isinstance(device, dict) and "name" in device else "unknown device"


PROTON = Proton()
