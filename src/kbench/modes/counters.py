"""annotation and ncu modes: the plan runs in a child process (kbench.capture.child) under Nsight Compute, each
stage launched once inside its NVTX range; the capture is ``profile.ncu-rep``.

annotation (the default first pass) reads a short metric list and ranks Top 3 by each stage's distance to its
roofline; ncu (the deep dive) reads the full set with source, ranks Top 3 by ncu's own rules' estimated speedups,
and also writes report-verbose.md (every rule and metric) and the annotated source and SASS of each stage.

ncu gets --clock-control none whenever the clocks are already held (by kbench or the lock script) or the user
turned locking off; only when kbench wanted to lock but was not permitted does ncu lock the base clock itself.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from kbench import ncu_preload
from kbench.analysis import lines, ncu, ncu_source
from kbench.analysis.counters import StageModel, combine
from kbench.analysis.devices import resolve
from kbench.analysis.figures import Facts, from_counters
from kbench.analysis.kernels import declared_kernels
from kbench.analysis.lines import LineModel
from kbench.analysis.ncu_kernels import stage_kernels
from kbench.errors import ConfigError, KbenchError, KernelError
from kbench.fsutil import json_object, write_json_atomic
from kbench.modes.base import Analysis, Capture, Context, Job, RunOptions
from kbench.nvtx import stage_range
from kbench.plan.base import KernelPlan
from kbench.report import chart, ncu_files
from kbench.report.lines import write as write_lines
from kbench.report.models import ProfileResult
from kbench.report.sections import Conformance, Counters, Sections

REPORT = "profile.ncu-rep"
SASS = "sass.json"  # the SASS ncu_report gave of the report's kernels, by address (ncu_source.sass_record)
PERMISSION = (
    "ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or let all users profile "
    "(nvidia driver option NVreg_RestrictProfilingToAdminUsers=0; https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)
Grouped = list[tuple[str, list[ncu.Kernel]]]


def group(kernels: list[ncu.Kernel], plan: KernelPlan | None) -> Grouped:
    """With a plan: its stages in order, each with the kernels of its NVTX range. Without: one stage per kernel."""
    if plan is None:
        names = [k.name or "kernel" for k in kernels]  # a kernel without a name still names its stage
        return [(n if names.count(n) == 1 else f"{n}#{k.index}", [k]) for n, k in zip(names, kernels, strict=True)]
    stages = [s.name for s in plan.checked_stages()]
    grouped = [(s, [k for k in kernels if ncu.stage_of(k) == s]) for s in stages]
    missing = [s for s, ks in grouped if not ks]
    if missing:
        expected = ", ".join(stage_range(s) for s in missing)
        raise KbenchError(
            f"no profiled kernel lies in NVTX range(s) {expected} (stage(s) {', '.join(missing)}): the ncu "
            "filter matched nothing there, or the report is of another plan"
        )
    return grouped


def conformance(plan: KernelPlan, grouped: Grouped, tiling: dict[str, Any]) -> list[dict[str, str]]:
    """Each stage's kernels and grid as ncu saw them against what the plan declares and launched."""
    rows = []
    declared = declared_kernels(plan.checked_stages())
    for stage, ks in grouped:
        names = sorted({k.name for k in ks})
        want = declared.get(stage, [])
        grid = tiling.get(stage, {}).get("grid")
        seen = sorted({str(k.grid[0] * k.grid[1] * k.grid[2]) for k in ks if k.grid})
        plan_grid = "n/a" if not grid else str(math.prod(int(g) for g in grid))
        if not want:
            verdict = "library stage: kernels not declared"
        elif set(names) <= set(want) and (plan_grid == "n/a" or seen == [plan_grid]):
            verdict = "as declared"
        else:
            verdict = "differs from the plan"
        rows.append(
            {
                "stage": stage,
                "declared": ", ".join(want) or "(library)",
                "observed": ", ".join(names),
                "launches": str(len(ks)),
                "plan_grid": plan_grid,
                "observed_grid": ", ".join(seen) or "n/a",
                "verdict": verdict,
            }
        )
    return rows


def stage_lines(rep: Path, grouped: Grouped, sass: dict[int, dict[str, str]]) -> dict[str, list[LineModel]]:
    """Each stage's kernels' time by source line, its longest kernel first (the one Evidence describes); where the
    report has no source counters, the static mix of the kernel compiled beside it (compiled/<stage>/), else none.
    ``sass``: each kernel's SASS by address, as far as known (sass.json beside the report), completed here."""
    actions = ncu.load_actions(rep)
    out: dict[str, list[LineModel]] = {}
    for name, ks in grouped:
        ordered = sorted(ks, key=lambda k: k.duration_us or 0.0, reverse=True)
        found = [
            m
            for k in ordered
            if (m := ncu_source.line_model(actions[k.index], sass.setdefault(k.index, {}))) is not None
        ]
        out[name] = found or lines.compiled(rep.parent / "compiled" / name)
    return out


def digest(path: Path) -> str:
    """A capture's sha256 (what sass.json beside it must name)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ncu_report_from(ncu: Path | None) -> None:
    """ncu_report importable: the installed package where there is one, else the module of the Nsight Compute that
    profiles (or, for `kbench analyze`, the one found on KBENCH_NCU, PATH or $CUDA_HOME), from its extras/python;
    where neither is, the analysis says what to install (analysis.ncu.NO_NCU_REPORT)."""
    if importlib.util.find_spec("ncu_report") is not None:
        return
    from kbench.capture import tools  # only here: an analysis imports no subprocess machinery

    try:
        ncu = ncu or tools.find_ncu()
    except tools.ToolMissing:
        return
    if (where := tools.ncu_python(ncu)) is not None and str(where) not in sys.path:
        sys.path.append(str(where))


def _failure(log: str, log_path: Path, code: int) -> KbenchError:
    from kbench.capture import child

    if line := child.failure(log):
        return KernelError(f"the plan failed under ncu: {line} (see {log_path})")
    errors = [line for line in log.splitlines() if "==ERROR==" in line]
    last = errors[-1].strip() if errors else f"exit code {code}"
    return KbenchError(f"ncu failed: {last} (see {log_path})")


class CounterMode:
    """annotation (``deep`` False) or ncu (``deep`` True)."""

    options: frozenset[str] = frozenset()
    suffixes = (".ncu-rep",)
    describes = "Nsight Compute reports (.ncu-rep)"
    offline_key = "report"
    default_bench_runs = 1  # ncu profiles one launch per stage
    in_process = False
    needs_gpu = True

    def __init__(self, name: str, deep: bool) -> None:
        self.name = name
        self.deep = deep

    # the capture's modules are imported where a live run needs them: `kbench analyze` of a report never does
    def tools(self, opts: RunOptions) -> dict[str, Any]:
        from kbench.capture import tools

        found = tools.find_ncu()
        return {"ncu": found, "versions": {"ncu": tools.version(found)}}

    def capture(self, job: Job) -> Capture:
        from kbench.capture import child, tools
        from kbench.capture.ncu_argv import annotation_lines, ncu_argv

        plan, opts, run_dir, env = job.plan, job.opts, job.run_dir, job.env
        stages = [s.name for s in plan.checked_stages()]
        argv_child = child.command(plan, run_dir, job.seed, opts.check, audit=True)
        control = "none" if env.clocks.locked or not opts.lock_clocks else "base"
        argv = ncu_argv(job.tools["ncu"], self.deep, stages, run_dir / "profile", argv_child, clock_control=control)
        job.params["ncu_command"] = shlex.join(argv)
        job.clock_note = f"; ncu ran with --clock-control {control}"
        opts.progress(f"{plan.package} {plan.version}: ncu ({self.name} mode) is profiling {len(stages)} stage(s)")
        started = time.monotonic()
        log_path = run_dir / "ncu.log"
        ncu_report_from(job.tools["ncu"])
        # what the analysis and the report load, loaded while this process only waits on ncu
        ncu_preload.start(run_dir / REPORT)
        if self.deep or annotation_lines():  # the deep dive and time by source line read each stage's SASS
            ncu_preload.warm_sass()
        chart.import_meanwhile()
        with env.sampled():
            done = tools.run(argv, timeout_s=opts.timeout_s, log_path=log_path, strays=(argv_child[-1],))
        wall = time.monotonic() - started
        if "ERR_NVGPUCTRPERM" in done.log:
            raise KbenchError(PERMISSION)
        if done.returncode != 0:
            raise _failure(done.log, log_path, done.returncode)
        rep = run_dir / REPORT
        if "No kernels were profiled" in done.log or not rep.exists():
            ranges = ", ".join(stage_range(s) for s in stages)
            raise KbenchError(
                f"ncu profiled no kernel: nothing launched inside the NVTX range(s) {ranges} (see {log_path})"
            )
        job.params["ncu_wall_s"] = round(wall, 2)
        fields, outcome = child.reported(run_dir)
        return Capture(
            files={"report": rep},
            facts={"wall_s": wall, "ncu_version": job.tools["versions"]["ncu"], "audit": outcome.get("audit")},
            **fields,
        )

    def open(self, path: Path) -> Capture:
        ncu_report_from(None)
        return Capture(files={"report": path}, live=False)

    def analyse(self, capture: Capture, ctx: Context) -> Analysis:
        rep, plan = capture.files["report"], ctx.plan
        kernels = ncu.kernels(rep)
        if not kernels and not capture.live:  # a file given to `kbench analyze`: damaged, or empty
            raise ConfigError(f"{rep} holds no profiled kernel: an empty or truncated Nsight Compute report")
        if not kernels:
            raise KbenchError(f"{rep} holds no profiled kernel")
        device = resolve(ctx.table, kernels[0].device or "unknown device")  # the GPU the report names
        grouped = group(kernels, plan)
        counters = [combine(name, ks) for name, ks in grouped]
        sha = digest(rep)
        sass = ncu_source.sass_table(json_object(rep.parent / SASS), sha)  # read by an earlier analysis of it
        per_line = stage_lines(rep, grouped, sass)
        models = (
            {
                s.name: StageModel(flops=s.flops, dram_bytes=s.dram_bytes, precision=s.precision)
                for s in plan.checked_stages()
            }
            if plan
            else {}
        )
        ceilings = device.ceilings()
        figures = from_counters(
            counters,
            models,
            ceilings,
            roofline_known=device.known,
            rules={name: [r for k in ks for r in k.rules] for name, ks in grouped} if self.deep else None,
            facts=Facts.of(
                device,
                capture.tiling,
                capture.predicted,
                kernels=stage_kernels(grouped, declared_kernels(plan.checked_stages()) if plan else {}),
                lines=per_line,
            ),
        )
        passes = max((c.replay_passes or 0) for c in counters)
        notes: list[str] = []
        record: dict[str, Any] = {}
        if capture.live:
            notes.append(
                f"ncu {capture.facts['ncu_version']}: {passes:.0f} replay passes per kernel; the ncu run took "
                f"{capture.facts['wall_s']:.1f} s of wall time (python start-up, autotuning and compilation included)"
            )
            record["replay_passes"] = passes
            if capture.facts.get("audit"):
                from kbench.analysis.audit import audit

                audited = audit(counters, capture.facts["audit"])
                notes += [r.line() for r in audited]
                record["audit"] = [r.model_dump() for r in audited]
        rows = conformance(plan, grouped, capture.tiling) if capture.live and plan else None
        mhz = sorted({round(c.sm_clock_mhz) for c in counters if c.sm_clock_mhz is not None})
        clock = f"{mhz[0]}-{mhz[-1]}" if len(mhz) > 1 else "".join(map(str, mhz))
        return Analysis(
            device=device,
            figures=figures,
            timing_method=f"ncu gpu__time_duration of one profiled launch per kernel ({self.name} mode)",
            sections=Sections(
                counters=Counters(source=rep.name, stages=counters),
                conformance=Conformance(rows=rows) if rows else None,
            ),
            # a plan's analysis draws it; without one the table places ncu's counts (drawing costs ~0.5 s of analyze)
            chart=chart.FILE if plan and device.spec and chart.placed(figures, ceilings) else None,
            notes=notes,
            record=record,
            data=(grouped, per_line, ncu_source.sass_record(sha, sass)),
            clock_note=f"SM {clock} MHz while ncu profiled (sm__cycles_elapsed.avg.per_second)" if mhz else None,
        )

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None:
        """kernels.csv and rules.csv (the tidy tables), the roofline chart, and in ncu mode report-verbose.md,
        source/<stage>.md and sass/<stage>-<kernel>.csv."""
        grouped, stage_models, sass = analysis.data
        ncu_files.tables(grouped, run_dir)
        if sass["kernels"]:  # the next analysis of this capture (the copy in this folder) skips the disassembler
            write_json_atomic(run_dir / SASS, sass)
        if self.deep:
            ncu_files.deep_dive(result, grouped, run_dir)
        for stage, models in stage_models.items():  # time by source line (annotation collects it too: ncu_argv)
            if models or self.deep:
                write_lines(run_dir, "lines" if any(m.static for m in models) else "source", stage, models)
        device = analysis.device
        if analysis.chart and device.spec is not None:
            title = f"{result.kernel} {result.version} on {device.name}"  # as the report's Device line names it
            # the practical roofs beside the datasheet ones: those Top 3's gains are measured against (Facts.of)
            chart.roofline_png(result.figures, device.ceilings(), device.spec.practical(), run_dir / analysis.chart,
                               title)  # fmt: skip


ANNOTATION = CounterMode("annotation", deep=False)
NCU = CounterMode("ncu", deep=True)
