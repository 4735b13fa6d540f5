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

from kbench.analysis import roofline as rl
from kbench.analysis.access_facts import Predicted, SiteFacts, table
from kbench.analysis.catalogue import memory
from kbench.analysis.catalogue.evidence import Evidence, Opportunity
from kbench.analysis.devices import resolve
from kbench.analysis.figures import PlanFigures
from kbench.analysis.opportunities import rank
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import KbenchError, KernelError
from kbench.fsutil import write_text_atomic
from kbench.modes.base import Analysis, Capture, Context, Job, RunOptions
from kbench.plan.base import KernelPlan
from kbench.report import folder
from kbench.report.models import ProfileResult
from kbench.report.sections import Accesses, AccessStage, Sections

FILE = "access.json"
FULL = "access.md"
ENTRIES = (memory.uncoalesced, memory.masked_lanes, memory.touched_beyond_model)
METHOD = (
    "no GPU: Duration is the Triton CPU interpreter's wall time for each stage's traced launch (TRITON_INTERPRET=1), "
    "not GPU time; the other figures are predicted for {device} from the traced addresses and the plan's model"
)
FEWER = (
    "Only {n} listed: a CPU trace sees addresses and masks only; latency, occupancy, pipelining and the tensor "
    "cores need a GPU run (--prof_type=event, then annotation). The gains are predicted upper bounds: each stage's "
    "roofline time on {device}'s practical roofs, scaled by the sectors its lanes touch beyond those they use (as if "
    "none came from L2) or by its masked lanes."
)


def point_words(outcome: dict[str, Any], stage: dict[str, Any] | None = None) -> str:
    """Where the facts come from, in words: the parameters traced and, for a sampled stage, how many programs."""
    values = ", ".join(f"{k}={v}" for k, v in outcome["values"].items())
    words = f"at {values}"
    if stage is not None and sum(stage["traced_programs"]) < sum(stage["programs"]):
        words += f", {sum(stage['traced_programs'])} of {sum(stage['programs'])} programs traced"
    return words


def predicted_of(outcome: dict[str, Any]) -> dict[str, Predicted]:
    """Each stage's ``Predicted`` from an access run's access.json."""
    out: dict[str, Predicted] = {}
    for name, stage in outcome["stages"].items():
        p = Predicted.of([SiteFacts.of(r) for r in stage["sites"]], point_words(outcome, stage))
        if p is not None:
            out[name] = p
    return out


def predicted_for(out_root: Path, plan: KernelPlan, digest: str) -> tuple[dict[str, Predicted], Path | None]:
    """The newest finished access run of ``plan``'s package and version whose source had ``digest`` (any
    parameters: the facts say at which), and its stages' predictions; nothing where there is none."""
    root = out_root / "access" / plan.package
    if not root.is_dir():
        return {}, None
    runs = sorted((p.parent for p in root.glob(f"*/*/{FILE}")), key=lambda d: d.name, reverse=True)
    for run in runs:
        try:
            params = json.loads((run / folder.PARAMS).read_text())
            source = params.get("source") or {}
            if params.get("status") != "ok" or params.get("version") != plan.version:
                continue
            if source.get("digest") != digest:
                continue
            return predicted_of(json.loads((run / FILE).read_text())), run
        except (OSError, ValueError, KeyError, TypeError):
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
        from kbench.capture.access_child import INTERPRETER_FAILED
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
            raise KbenchError(f"the access trace failed: {line or f'exit code {done.returncode}'} (see {log_path})")
        outcome = json.loads((run_dir / FILE).read_text())
        check = outcome.get("check")
        tiling = {}
        for name in outcome["stages"]:
            tiling_file = run_dir / "tiling" / f"{name}.json"
            tiling[name] = json.loads(tiling_file.read_text())
        return Capture(
            files={"access": run_dir / FILE},
            check=check["line"] if check else None,
            tiling=tiling,
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
        figures = predicted_figures(outcome, device.spec.ceilings(), device.spec.practical(), device.spec.display_name)
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


def _stage_figures(
    name: str, stage: dict[str, Any], model: dict[str, Any], ceilings: dict[str, rl.Ceilings], note: str
) -> StageFigures:
    us = float(stage["seconds"]) * 1e6
    flops, nbytes, precision = model["flops"], model["dram_bytes"], model["precision"]
    c = ceilings.get(precision)
    placed = c is not None and nbytes
    return StageFigures(
        name=name,
        precision=precision,
        flops=flops,
        dram_bytes=nbytes,
        model="plan",
        timing=TimingStats.of([us]),
        duration_us=us,
        tflops=None,
        gbps=None,
        intensity=rl.intensity(flops, nbytes),
        ridge=c.ridge if c else None,
        roof_tflops=rl.roof_tflops(c, flops, nbytes) if placed and c else None,
        bound_us=rl.bound_us(c, flops, nbytes) if placed and c else None,
        limiting_roof=rl.limiting_roof(c, flops, nbytes) if placed and c else None,
        key_issue=note,
    )


def predicted_us(bound: float, memory_limited: bool, p: Predicted | None, model_bytes: float) -> float:
    """A stage's predicted time: its roofline time on the practical roofs, times the sectors its lanes touch over
    those they use and the distinct bytes over the model's (memory-limited), or over the lanes left active (the
    others)."""
    if p is None:
        return bound
    if memory_limited:
        touched = (p.ld_sectors or 0.0) + (p.st_sectors or 0.0)
        needed = (p.ld_sectors or 0.0) * (p.ld_use or 32.0) / 32.0 + (p.st_sectors or 0.0) * (p.st_use or 32.0) / 32.0
        ratio = touched / needed if needed else 1.0
        beyond = p.distinct_bytes / model_bytes if p.distinct_bytes and model_bytes else 1.0
        return bound * max(1.0, ratio, beyond)
    return bound / max(0.01, 1.0 - p.masked_pct / 100.0)


def key_issue(p: Predicted | None) -> str:
    if p is None:
        return "no Triton load or store traced (a torch or library call runs no Triton kernel under the interpreter)"
    worst = p.worst
    use = f"{worst.bytes_per_sector:.1f} of 32 B per sector at {worst.line} ({worst.kind})" if worst else "n/a"
    return f"predicted on CPU: worst {use}; {p.masked_pct:.1f}% of lanes masked; Duration is interpreter time"


def predicted_figures(
    outcome: dict[str, Any], ceilings: dict[str, rl.Ceilings], practical: dict[str, rl.Ceilings], device: str
) -> PlanFigures:
    """The report's core for an access run (see the module's docstring). Pure."""
    predictions = predicted_of(outcome)
    figs = [
        _stage_figures(name, stage, outcome["model"][name], ceilings, key_issue(predictions.get(name)))
        for name, stage in outcome["stages"].items()
    ]
    timed: list[tuple[StageFigures, float, rl.Ceilings | None]] = []
    for f in figs:
        pc = practical.get(f.precision) or ceilings.get(f.precision)
        if pc is None or f.flops is None or not f.dram_bytes:
            timed.append((f, 0.0, None))
            continue
        bound = rl.bound_us(pc, f.flops, f.dram_bytes)
        memory_limited = rl.limiting_roof(pc, f.flops, f.dram_bytes) == "memory"
        timed.append((f, predicted_us(bound, memory_limited, predictions.get(f.name), f.dram_bytes), pc))
    total = sum(t for _, t, _ in timed)
    if total <= 0:
        raise KbenchError(
            "no stage has a FLOP/byte model on this device's roofs: access mode cannot rank what it found "
            f"(precisions {', '.join(sorted({f.precision for f in figs}))})"
        )
    found: list[Opportunity | None] = []
    for f, t, pc in timed:
        if pc is None:
            continue
        e = Evidence(
            stage=f.model_copy(update={"duration_us": t}),
            total_us=total,
            practical=pc,
            predicted=predictions.get(f.name),
            tile=dict(outcome["stages"][f.name].get("config") or {}),
        )
        found += [entry(e) for entry in ENTRIES]
    deciding, t, pc = max(timed, key=lambda x: x[1])
    assert pc is not None and deciding.flops is not None and deciding.dram_bytes
    limit = rl.limiting_roof(pc, deciding.flops, deciding.dram_bytes)
    plan_class = "Memory" if limit == "memory" else "Compute"
    root = (
        f"Predicted, no GPU ran: {deciding.name} holds {100 * t / total:.0f}% of the plan's predicted time on {device} "
        f"at {deciding.intensity or 0:.1f} FLOP/B against a ridge of {pc.ridge:.0f} FLOP/B, so {limit} sets it."
    )
    fewer = FEWER.format(n=1, device=device)
    ranked = rank(found, fewer=lambda n: FEWER.format(n=n, device=device), none=(_nothing(figs, predictions), fewer))
    return PlanFigures(
        stages=figs,
        total_us=sum(f.duration_us for f in figs),
        bottleneck=plan_class,
        root_cause=root,
        opportunities=ranked[0],
        opportunities_note=ranked[1],
        ceilings_source=f"{device} datasheet; predicted times on its practical roofs",
        roofline_known=True,
    )


def _nothing(figs: list[StageFigures], predictions: dict[str, Predicted]) -> Opportunity:
    """Top 3's one line when the trace predicts no access defect: the worst line's figure, nothing to gain from it."""
    worst = min(
        ((n, p.worst) for n, p in predictions.items() if p.worst is not None),
        key=lambda x: x[1].bytes_per_sector or 32.0,
        default=None,
    )
    if worst is None:
        name = figs[0].name
        return Opportunity(
            name="No load or store traced: nothing to predict on CPU", gain_pct=0.0, metric=f"{name}.sites", value="0"
        )
    name, w = worst
    return Opportunity(
        name=f"No access defect predicted on CPU: every line uses at least {w.bytes_per_sector:.1f} of 32 bytes per "
        "sector and masks few lanes; measure on a GPU for the rest",
        gain_pct=0.0,
        metric=f"{name}.worst_bytes_per_sector_predicted",
        value=f"{w.bytes_per_sector:.1f}",
        named=True,
    )


def accesses_section(outcome: dict[str, Any]) -> Accesses:
    check = outcome.get("check")
    check_reuse = {}
    if check:
        for r in check["sites"]:
            f = SiteFacts.of(r)
            if f.reuse is not None:
                check_reuse[f"{f.kind} {f.line}"] = f.reuse
    stages = []
    for name, stage in outcome["stages"].items():
        facts = [SiteFacts.of(r) for r in stage["sites"]]
        distinct = [f.distinct_bytes for f in facts]
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
                requested_bytes=sum(f.bytes for f in facts),
                distinct_bytes=None if None in distinct else sum(d or 0 for d in distinct),
            )
        )
    requested = outcome.get("requested") or {}
    dtype = f" ({outcome['dtype_note']})" if outcome.get("dtype_note") else ""
    point = f"{point_words(outcome)}: the parameters asked for{dtype}"
    if any(str(requested.get(k)) != str(v) for k, v in outcome["values"].items() if k != "dtype"):
        point = f"{point_words(outcome)}{dtype}"
    verdict = None
    if check:
        values = ", ".join(f"{k}={v}" for k, v in check["values"].items())
        verdict = f"at the plan's check parameters ({values}), every program traced: {check['line']}"
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
