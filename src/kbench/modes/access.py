"""Access mode (no GPU): every stage's loads and stores traced under Triton's CPU interpreter, in a child process
(kbench.capture.access_child) that has TRITON_INTERPRET=1 from its start. The capture is ``access.json``; the
analysis predicts for a device of conf/devices.json (``--device``, else this machine's GPU, else an H100):

- Stages: Duration is the interpreter's wall time for the stage (not GPU time: no GPU ran); TC%, DRAM%, Occ% and the
  per-stage class are n/a; Key Issue says what the accesses predict.
- Bottleneck: the class the plan's FLOP/byte model gives on the device's practical roofs (predicted, and said so).
- Top 3: the catalogue's access entries (uncoalesced lines, masked lanes, memory beyond the model) over a predicted
  time per stage: its roofline time on the practical roofs, scaled by the sectors its lanes touch beyond those they
  use (memory-limited stages) or by the lanes masked off (the others).
- ``## Accesses``: each stage's load/store lines (the first few; access.md has them all) and the pictures.

The GPU modes read the same facts (``predicted_for``): the newest access run of the kernel's very source.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from kbench.analysis.access_facts import Predicted, SiteFacts, table
from kbench.analysis.access_figures import point_words, predicted_figures, predicted_of, words
from kbench.analysis.devices import resolve
from kbench.errors import KbenchError, KernelError
from kbench.fsutil import json_object, write_text_atomic
from kbench.modes.base import Analysis, Capture, Context, Job, RunOptions
from kbench.plan.base import KernelPlan
from kbench.report import folder
from kbench.report.models import ProfileResult
from kbench.report.sections import Accesses, AccessStage, Sections

FILE = "access.json"
FULL = "access.md"
METHOD = (
    "no GPU: Duration is the Triton CPU interpreter's wall time for each stage's traced launch (TRITON_INTERPRET=1), "
    "not GPU time; the other figures are predicted for {device} from the traced addresses and the plan's model"
)


def predicted_for(out_root: Path, plan: KernelPlan, digest: str) -> tuple[dict[str, Predicted], Path | None]:
    """The newest finished access run of ``plan``'s package and version whose source had ``digest`` (any
    parameters: the facts say at which), and its stages' predictions; nothing where there is none."""
    root = out_root / "access" / plan.package
    if not root.is_dir():
        return {}, None
    runs = sorted((p.parent for p in root.glob(f"*/*/{FILE}")), key=lambda d: d.name, reverse=True)
    for run in runs:
        params = json_object(run / folder.PARAMS) or {}  # as kbench wrote it: never through a link, never too large
        source = params.get("source")
        if params.get("status") != "ok" or params.get("version") != plan.version:
            continue
        if not isinstance(source, dict) or source.get("digest") != digest:
            continue
        try:
            return predicted_of(json_object(run / FILE) or {}), run
        except (KbenchError, ValueError, KeyError, TypeError, AttributeError):  # not a run to read from
            continue
    return {}, None


class AccessMode:
    name = "access"
    options = frozenset({"device", "access_programs"})
    suffixes: tuple[str, ...] = ()
    describes = ""
    offline_key = "access"
    default_bench_runs = 1
    in_process = False
    needs_gpu = False

    def tools(self, opts: RunOptions) -> dict[str, Any]:
        import importlib.util

        from kbench.capture.tools import ToolMissing

        for package in ("numpy", "triton"):
            if importlib.util.find_spec(package) is None:
                raise ToolMissing(
                    f"{package} is not installed: access mode runs Triton's interpreter (pip install {package})"
                )
        return {}

    def capture(self, job: Job) -> Capture:
        from kbench.capture import child, tools
        from kbench.capture.access_child import BUG, INTERPRETER_FAILED
        from kbench.capture.tools import ToolMissing

        plan, opts, run_dir = job.plan, job.opts, job.run_dir
        argv = child.command(
            plan, run_dir, job.seed, opts.check, module="kbench.capture.access_child", programs=opts.access_programs
        )
        job.params.update(access_programs=opts.access_programs)
        opts.progress(
            f"{plan.package} {plan.version}: tracing every load and store under Triton's CPU interpreter "
            f"(at most {opts.access_programs or 'all'} programs per launch){', then the check' if opts.check else ''}"
        )
        started = time.monotonic()
        log_path = run_dir / "access.log"
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        done = tools.run(argv, timeout_s=opts.timeout_s, log_path=log_path, env=env, strays=(argv[-1],))
        job.params["access_wall_s"] = round(time.monotonic() - started, 2)
        if done.returncode != 0:
            line = child.failure(done.log)
            facts = f"facts in {run_dir / FILE}, " if (run_dir / FILE).exists() else ""
            if line and done.returncode == KernelError.exit_code:
                raise KernelError(f"{line} ({facts}log {log_path})")
            if line and done.returncode == INTERPRETER_FAILED:
                raise ToolMissing(f"{line} (see {log_path})")
            if done.returncode == BUG:  # not a KbenchError: the CLI says it is a bug in kbench (exit 70)
                raise RuntimeError(f"the access trace: {line or 'exit code 70'} (traceback in {log_path})")
            raise KbenchError(f"the access trace failed: {line or f'exit code {done.returncode}'} (see {log_path})")
        outcome = json.loads((run_dir / FILE).read_text())
        check = outcome.get("check")
        return Capture(
            files={"access": run_dir / FILE},
            check=check["line"] if check else None,
            tiling=folder.tiling_beside(run_dir / FILE),
            source=outcome.get("source"),
        )

    def open(self, path: Path) -> Capture:
        raise KbenchError("access mode's captures are analysed when they are made; run --prof_type=access again")

    def analyse(self, capture: Capture, ctx: Context) -> Analysis:
        outcome = json.loads(capture.files["access"].read_text())
        device = ctx.device or resolve(ctx.table, "unknown device")
        if device.spec is None:
            raise KbenchError(
                f"{device.name} is not in conf/devices.json: access mode predicts for a known device; name one with "
                f"--device ({', '.join(ctx.table.devices)})"
            )
        spec = device.spec
        figures = predicted_figures(outcome, device.ceilings(), spec.practical(), spec.display_name)
        return Analysis(
            device=device,
            figures=figures,
            timing_method=METHOD.format(device=device.spec.display_name),
            sections=Sections(accesses=accesses_section(outcome)),
            notes=[outcome["dtype_note"]] if outcome.get("dtype_note") else [],
            record={"predicted_for": device.key},
        )

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None:
        section = result.sections.accesses
        if section is not None:
            write_text_atomic(run_dir / FULL, full_text(result, section))


def accesses_section(outcome: dict[str, Any]) -> Accesses:
    check = outcome.get("check")
    check_reuse = {}
    if check:
        for r in check["sites"]:
            f = SiteFacts.of(r)
            if f.reuse is not None:
                check_reuse[f"{f.kind} {f.line}"] = f.reuse
    predictions = predicted_of(outcome)
    stages = []
    for name, stage in outcome["stages"].items():
        p = predictions.get(name)
        stages.append(
            AccessStage(
                name=name,
                grids=stage["grids"],
                programs=stage["programs"],
                traced_programs=stage["traced_programs"],
                seconds=stage["seconds"],
                sites=stage["sites"],
                pictures=stage["pictures"],
                model_bytes=outcome["model"][name]["dram_bytes"],
                requested_bytes=p.requested_bytes if p else 0,
                distinct_bytes=p.distinct_bytes if p else 0,
            )
        )
    requested = outcome.get("requested") or {}
    dtype = f" ({outcome['dtype_note']})" if outcome.get("dtype_note") else ""
    asked = all(str(requested.get(k)) == str(v) for k, v in outcome["values"].items() if k != "dtype")
    point = f"{point_words(outcome)}{': the parameters asked for' if asked else ''}{dtype}"
    verdict = None
    if check:
        verdict = f"at the plan's check parameters ({words(check['values'])}), every program traced: {check['line']}"
    return Accesses(point=point, stages=stages, check=verdict, check_reuse=check_reuse)


def full_text(result: ProfileResult, section: Accesses) -> str:
    """access.md: every load/store line of every stage."""
    lines = [f"# Accesses: {result.kernel} {result.version}", "", f"Traced {section.point}."]
    if section.check:
        lines += ["", f"Check: {section.check}."]
    for s in section.stages:
        facts = [SiteFacts.of(r) for r in s.sites]
        lines += ["", f"## {s.name}", "", table(facts)]
    return "\n".join(lines) + "\n"


ACCESS = AccessMode()
