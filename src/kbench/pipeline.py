"""The one profiling pipeline: prepare -> capture -> analyse -> write, the same for every mode.

``profile`` runs a plan in a mode (a backend of ``kbench.modes``) into a new run folder; ``analyze`` is the
same pipeline started at "analyse" from a capture on disk (`kbench analyze`). Either way the run folder gets
params.json first (status running), then the mode's files, result.json and report.md, and params.json's status
ok at the end; whatever escapes on the way marks the folder failed or interrupted, and earlier runs are never
touched.
"""

from __future__ import annotations

import logging
import shlex
import sys
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbench import inputs, metric_libraries
from kbench.analysis.devices import load_devices
from kbench.errors import KbenchError, KernelError, UsageError
from kbench.fsutil import copy_atomic, safe, write_json_atomic, write_text_atomic
from kbench.modes import registry
from kbench.modes.base import Analysis, Backend, Capture, Context, Job, PartialCapture, RunOptions
from kbench.plan import sources
from kbench.plan.base import KernelPlan
from kbench.plan.discovery import current, load_version
from kbench.report import folder, report_json, waterfall_chart
from kbench.report.comparison import rows_between
from kbench.report.models import ProfileResult, read_result
from kbench.report.render import render_report
from kbench.report.sections import Baseline, Tiling
from kbench.report.source import Source, change

if TYPE_CHECKING:
    from kbench.capture.clocks import Measuring

log = logging.getLogger(__name__)
NO_GPU = "n/a: no GPU used (Triton's CPU interpreter)"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def named_baseline(path: Path, plan: KernelPlan) -> ProfileResult:
    """A baseline the user named: a finished run of the same kernel and parameters (checked before running; any
    other folder is bad input)."""
    previous = read_result(path)
    if previous is None:
        raise UsageError(f"--baseline {path} has no readable {folder.RESULT}; name the folder of a finished run")
    if previous.kernel != plan.package or previous.params != plan.values():
        raise UsageError(
            f"--baseline {path} profiled {previous.kernel} {previous.params}, not {plan.package} {plan.values()}; "
            "a baseline must have the same kernel and parameters"
        )
    return previous


def baseline(
    analysis: Analysis, run_dir: Path, named: tuple[Path, ProfileResult] | None, source: Source | None = None
) -> Baseline | None:
    """``## vs Baseline``: against the run the user named, else the previous run of the same kernel and
    parameters (whole-plan medians first when both runs measured one)."""
    prev_dir, previous = named if named else (folder.previous_run(run_dir), None)
    if prev_dir is None:
        return None
    previous = previous or read_result(prev_dir)
    if previous is None:
        log.warning("previous run %s has no readable %s; no baseline comparison", prev_dir, folder.RESULT)
        return None
    code = change(previous.source, source)
    rows = rows_between(
        previous.figures,
        previous.plan_timing,
        previous.sections,
        analysis.figures,
        analysis.plan_timing,
        analysis.sections,
    )
    return Baseline(
        rows=rows,
        source=f"`{prev_dir}` ({previous.kernel} {previous.version})",
        code=code.line,
        code_changed=code.changed,
    )


def ran_source(loaded: dict[str, Any] | None, child: dict[str, Any] | None) -> Source | None:
    """The source that ran: what this process loaded, or, where the plan ran in a child process that loaded other
    source (the files were edited in between), the child's, saying so."""
    here, there = Source.of(loaded), Source.of(child)
    if there is None or here is None or there.digest == here.digest:
        return here or there
    return there.model_copy(
        update={
            "note": f"the profiled child loaded other source than this process had ({here.digest}): edited meanwhile"
        }
    )


def record_clocks(env: Measuring, params: dict[str, Any], note: str = "") -> str:
    """The clocks' one-line account (report) and every figure behind it (params.json)."""
    line = env.line() + note
    params["clocks"] = line
    params["clock_samples"] = env.summary.model_dump() if env.summary else None
    params["clock_notes"] = env.clocks.notes
    return line


def _write(
    backend: Backend, analysis: Analysis, result: ProfileResult, run_dir: Path, params: dict[str, Any]
) -> ProfileResult:
    """The write step: the mode's files, result.json, report.json, report.md, then params.json's status ok."""
    backend.write(analysis, result, run_dir)
    # every live GPU run draws its distance; `kbench analyze` only where it draws the roofline too (with a plan): the
    # picture's matplotlib costs a plan-less analysis ~0.5 s
    if result.figures.waterfalls and result.figures.timer == "gpu" and (not result.offline or result.chart):
        title = f"{result.kernel} {result.version} on {result.device}: distance to the practical roof"
        if waterfall_chart.waterfall_png(result.figures.waterfalls, run_dir / waterfall_chart.FILE, title):
            result = result.model_copy(update={"waterfall_chart": waterfall_chart.FILE})
    result = result.model_copy(update={"files": folder.guide(run_dir)})
    write_json_atomic(run_dir / folder.RESULT, result.model_dump(mode="json"))
    write_json_atomic(run_dir / folder.REPORT_JSON, report_json.build(result).model_dump(mode="json"))
    write_text_atomic(run_dir / "report.md", render_report(result))
    params.update(analysis.record)
    params.update(status="ok", finished_at=_now())
    write_json_atomic(run_dir / folder.PARAMS, params)
    return result


def _result(
    mode: str,
    identity: tuple[str, str, dict[str, Any]],
    analysis: Analysis,
    capture: Capture,
    run_dir: Path,
    **core: Any,
) -> ProfileResult:
    kernel, version, values = identity
    return ProfileResult(
        kernel=kernel,
        version=version,
        mode=mode,
        params=values,
        device=analysis.device.name,
        device_key=analysis.device.key,
        figures=analysis.figures,
        plan_timing=analysis.plan_timing,
        timing_method=analysis.timing_method,
        chart=analysis.chart,
        check=capture.check,
        notes=analysis.notes,
        out_dir=str(run_dir),
        **{"sections": analysis.sections, **core},
    )


def profile(mode: str, plan: KernelPlan, opts: RunOptions) -> ProfileResult:
    """Profile ``plan`` in ``mode`` into a new run folder under ``opts.out_root``."""
    from kbench.capture import gpu  # a live run's modules: `kbench analyze` needs none of them
    from kbench.capture.clocks import measuring, unmeasured

    backend = registry.get(mode)
    registry.check_options(backend, opts)
    if opts.bench_runs < 1:
        raise UsageError("--bench-runs must be at least 1")
    plan = current(plan)  # the version's source as it is now, even where this process loaded it before an edit
    loaded = sources.record(type(plan).__module__)
    here = backend.in_process  # a mode whose plan runs in a child never imports torch here
    on_gpu = registry.gpu_needed(backend)
    if on_gpu:
        gpu.require_cuda(f"--prof_type={mode}", torch=here)
    found = backend.tools(opts)  # a missing profiler stops the run before any folder is made
    named = (opts.baseline, named_baseline(opts.baseline, plan)) if opts.baseline is not None else None
    # a mode that uses no GPU (access) predicts for the device it names: --device, else the GPU here, else an H100
    table = load_devices()
    device = gpu.active_device(table, torch=here) if on_gpu else gpu.target_device(table, opts.device)
    run_dir = folder.new_run_dir(opts.out_root, mode, plan.package, plan.slug())
    seed = opts.seed if opts.seed is not None else time.time_ns() % (2**31)
    params: dict[str, Any] = {
        "kernel": plan.package,
        "version": plan.version,
        "mode": mode,
        "params": plan.values(),
        "device": {"name": device.name, "key": device.key, "known": device.known, "driver": device.driver},
        "tools": {**gpu.tool_versions(torch=here), **found.get("versions", {})},
        "command": shlex.join(sys.orig_argv),
        "seed": seed,
        "check": opts.check,
        "gpu": on_gpu,  # False: the run used no GPU (its durations are the CPU interpreter's)
        "source": loaded,
        "started_at": _now(),
        "status": "running",
        **folder.owner(),
    }
    write_json_atomic(run_dir / folder.PARAMS, params)
    opts.progress(f"{mode} mode: {plan.package} {plan.version} into {run_dir}")
    with folder.marked_on_failure(run_dir, params):
        held = measuring(opts.lock_clocks, opts.wait, opts.progress) if on_gpu else unmeasured(NO_GPU)
        with held as env:
            job = Job(plan, opts, run_dir, seed, device, params, env, found)
            try:
                capture = backend.capture(job)
            finally:  # a failed capture's folder says what the clocks did too
                clocks = record_clocks(env, params, job.clock_note)
        source = ran_source(loaded, capture.source)
        params["source"] = source.model_dump() if source else None
        if on_gpu and source is not None and not capture.predicted:
            # the loads and stores an access run of this very source traced on a CPU: the catalogue reads them
            from kbench.modes.access import predicted_for

            predicted, access_run = predicted_for(opts.out_root, plan, source.digest)
            if access_run is not None:
                capture = replace(capture, predicted=predicted)
                params["predicted_from"] = str(access_run)
                stages = {name: p.record() for name, p in predicted.items()}
                write_json_atomic(run_dir / folder.PREDICTED, {"from": str(access_run), "stages": stages})
        write_json_atomic(run_dir / folder.PARAMS, params)
        opts.progress("analysing the capture")
        analysis = backend.analyse(capture, Context(plan, table, device))
        if analysis.clock_note:
            clocks = params["clocks"] = f"{clocks}; {analysis.clock_note}"
        sections = analysis.sections.model_copy(
            update={
                "baseline": baseline(analysis, run_dir, named, source),
                "tiling": Tiling(stages=capture.tiling) if capture.tiling else None,
            }
        )
        result = _result(
            mode,
            (plan.package, plan.version, plan.values()),
            analysis,
            capture,
            run_dir,
            clocks=clocks,
            clock_summary=env.summary,
            tools=params["tools"],
            source=source,
            sections=sections,
        )
        opts.progress("writing report.md and report.json")
        return _write(backend, analysis, result, run_dir, params)


@dataclass(frozen=True)
class Beside:
    """What the params.json beside a capture says of the run that made it: its plan and mode where they hold here,
    and the report's note on where the plan came from (or why none was taken)."""

    plan: KernelPlan | None = None
    mode: str | None = None
    note: str = ""


def beside(path: Path, made: dict[str, Any], kernel_path: list[str] | None = None) -> Beside:
    """The plan and mode of the run folder a capture lies in, read from its params.json (``made``) as data: the
    kernel, version and parameters pass the checks a typed --plan passes (a kernel package visible here, one of its
    versions, the plan's parameter checks), never as options or paths; the mode only where it reads this capture."""
    if not made:
        return Beside()  # a capture from elsewhere
    mode = made.get("mode")
    if not (isinstance(mode, str) and mode in registry.names() and path.suffix in registry.reads(mode)[0]):
        mode = None
    kernel, version, values = made.get("kernel"), made.get("version"), made.get("params")
    try:
        if not (isinstance(kernel, str) and isinstance(version, str) and isinstance(values, dict)):
            raise UsageError("its kernel, version and params are not two names and a table")
        plan = load_version(kernel, version, kernel_path).from_values({str(k): str(v) for k, v in values.items()})
    except UsageError as e:
        note = f"params.json beside the capture names no plan kbench can load here ({e}): analysed without a plan"
        return Beside(None, mode, note + "; --plan names one")
    said = ", ".join(f"{k}={v}" for k, v in plan.values().items())
    note = f"Plan: {plan.package} {plan.version} ({said}) taken from params.json beside the capture"
    note += "; --plan overrides it"
    return Beside(plan, mode, note)


def analyze(
    path: Path, mode: str | None, out_root: Path, plan: KernelPlan | None, kernel_path: list[str] | None = None
) -> ProfileResult:
    """`kbench analyze`: the reports of an existing capture, in a new run folder (the capture copied in beside
    them); no GPU or profiler needed. Without ``plan``, a capture in a kbench run folder is analysed with the plan
    and mode its params.json names (``beside``)."""
    if not path.is_file():
        raise UsageError(f"{path}: no such capture file")
    inputs.check_size(path)  # no backend is handed a capture over its kind's limit
    registry.for_capture(path, mode)  # a file no mode reads (a run's report.json): one line before anything else
    made = folder.made_with(path)  # the params.json of the run folder it lies in ({}: a capture from elsewhere)
    taken = Beside()
    if plan is not None:
        _same_plan(path, made, plan)
    else:
        taken = beside(path, made, kernel_path)
        plan, mode = taken.plan, mode or taken.mode
    backend = registry.for_capture(path, mode)
    metric_libraries.claim_if_sampling_may_follow()  # before ncu_report loads its copy (the resident, the API)
    capture = backend.open(path)
    from kbench.analysis import records  # checks what a run folder keeps beside its capture

    if plan is not None and (tiling := folder.tiling_beside(path)):
        # a capture kbench made, analysed with its plan: the launch records beside it (grid, the compiled kernel's
        # instruction mix) feed the catalogue as they did live
        capture = replace(capture, tiling=records.launches(tiling, path.parent))
    if plan is not None and (predicted := folder.predicted_beside(path)):  # and the access run's predictions it read
        stages = records.predictions(predicted["stages"], path.parent / folder.PREDICTED)
        capture = replace(capture, predicted=stages)
    if plan is not None:
        identity = (plan.package, plan.version, plan.values())
    else:
        identity = (safe(path.stem), "offline", {backend.offline_key: safe(path.name), "dtype": "n/a"})
    analysis: Analysis | None = None
    partial: PartialCapture | None = None
    try:
        analysis = backend.analyse(capture, Context(plan, load_devices()))
        if taken.note:
            analysis = replace(analysis, notes=[*analysis.notes, taken.note])
    except PartialCapture as e:  # files but no report.md: written into the run folder all the same
        partial = e
    run_dir = folder.new_run_dir(out_root, backend.name, identity[0], plan.slug() if plan else safe(path.stem))
    params = {
        "kernel": identity[0],
        "version": identity[1],
        "mode": backend.name,
        "params": identity[2],
        "device": {"name": analysis.device.name, "key": analysis.device.key} if analysis else None,
        "source": str(path),
        "command": shlex.join(sys.orig_argv),
        "analyzed_at": _now(),
        "status": "running",
        **folder.owner(),
    }
    write_json_atomic(run_dir / folder.PARAMS, params)
    with folder.marked_on_failure(run_dir, params):
        copy_atomic(path, run_dir / path.name)
        if analysis is not None:
            result = _result(
                backend.name,
                identity,
                analysis,
                capture,
                run_dir,
                offline=True,
                clocks=analysis.clock_note or "",
                source=Source.of(made.get("source")),  # what ran when kbench made the capture
            )
            return _write(backend, analysis, result, run_dir, params)
        assert partial is not None
        partial.write(run_dir)
        params.update(status="undecided", finished_at=_now(), undecided=str(partial))
        write_json_atomic(run_dir / folder.PARAMS, params)
    raise KbenchError(
        f"{partial}: wrote its tables, trace.json and timeline.md to {run_dir}; a report.md needs the plan's "
        "FLOP/byte model (--plan <kernel_package> [<version>] --<param>=<value>) or counters "
        "(--prof_type=annotation)"
    )


def _same_plan(path: Path, made: dict[str, Any], plan: KernelPlan) -> None:
    """A capture kbench made names its kernel and parameters in params.json beside it (``made``): --plan must agree,
    or the FLOP/byte model and the stages would be another kernel's."""
    kernel, values = made.get("kernel"), made.get("params")
    if not isinstance(values, dict) or kernel is None:
        return  # a capture from elsewhere: nothing to compare with
    default = {p.name: p.default for p in plan.params()}
    # a parameter the capture predates (added to the plan since) agrees where the plan holds its default
    given = {k: str(v) for k, v in plan.values().items() if k in values or v != default.get(k)}
    if kernel != plan.package or {k: str(v) for k, v in values.items()} != given:
        raise UsageError(
            f"{path} was captured for {kernel} {made.get('version', '')} {values}, but --plan gives {plan.package} "
            f"{plan.version} {plan.values()}: its model would be another kernel's; give the capture's parameters"
        )


def run_unprofiled(plan: KernelPlan, do_check: bool) -> str:
    """--prof_type=disabled: prepare, check, run every stage once with no profiler; a one-line summary."""
    import torch

    from kbench.capture import gpu
    from kbench.capture.prepare import check, prepare_on_gpu

    gpu.require_cuda("--prof_type=disabled")
    prep = prepare_on_gpu(plan, gpu.active_device(), time.time_ns() % (2**31))
    verdict = "check skipped (--no-check)"
    if do_check:
        result = check(prep, "cuda")
        if not result.passed:
            raise KernelError(f"correctness check failed: {result.line()}")
        verdict = result.line()
    prep.run_all()
    torch.cuda.synchronize()
    return f"{plan.package} {plan.version}: ran {len(prep.stages)} stage(s) once without a profiler; {verdict}"
