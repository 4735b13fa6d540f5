"""The access mode's program: `python -m kbench.capture.access_child SPEC.json`, run with TRITON_INTERPRET=1 (Triton
decides at a kernel's decoration whether it is interpreted, so the plan must be imported in a process that had it
from the start). No GPU is used.

1. At the requested point (bf16 traced as fp16: the same addresses), every stage runs once under the interpreter at
   the first configuration of its tuning space, each traced apart (kbench.capture.access): a launch of more than
   ``programs`` programs runs a sample of them, weighted. Each stage's load/store lines (kbench.analysis.access), its
   grid, how long the interpreter took, and a picture per tensor it touched (which programs read and wrote each
   element) go into the run folder.
2. With the check on: the correctness check at the plan's check parameters, every program traced: an access out of
   bounds fails it (the line and the program named), and its lines give reuse across programs.

It writes ``access.json`` (``FILE``), ``tiling/<stage>.json`` and ``access/*.png``; exit 5 when the check fails.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kbench.capture.child import PREFIX
from kbench.errors import KbenchError, KernelError
from kbench.fsutil import safe, write_json_atomic

FILE = "access.json"
INTERPRETER_FAILED = 7  # the interpreter could not run a stage (its exit code; docs/errors)
PICTURES = "access"
MAX_PICTURES = 8  # tensors drawn, over all stages (the largest first)
PICTURED = 16  # programs a picture tells apart: the first to run


def trace_point(plan: Any, seed: int, programs: int, run_dir: Path, pictures: int) -> tuple[dict[str, Any], list[Any]]:
    """Step 1 (see the module's docstring): each stage's record for access.json, and every stage's load/store lines
    together."""
    from kbench.analysis.access import program_work, sites, touched
    from kbench.capture import access, gluon
    from kbench.capture.prepare import built, guarded
    from kbench.report.chart import access_png, traced_at

    ws = guarded("setup", lambda: plan.setup("cpu", seed))
    allocations = access.allocations_of(ws)
    stages: dict[str, Any] = {}
    every: list[Any] = []
    drawn = 0
    for stage in plan.checked_stages():
        config = dict(stage.tuning[0])
        launch = built(plan, stage, ws, config)
        start = time.perf_counter()
        with gluon.compile_only() as made, access.traced(allocations, programs) as trace:
            try:
                guarded(stage.name, launch.fn)
            except KernelError as e:
                raise InterpreterFailed(f"Triton {_triton()}'s CPU interpreter could not run it: {e}") from None
        if made:  # compiled, never run: nothing was traced
            raise InterpreterFailed(
                f"access mode cannot trace stage {stage.name}: its kernel {made[0].name} is written in Gluon, which "
                f"Triton's CPU interpreter cannot run ({made[0].words()}, so it builds); profile it on a GPU "
                "(--prof_type=event, annotation or ncu)"
            )
        seconds = time.perf_counter() - start
        facts = sites(trace.accesses, whole=trace.whole)
        every += facts
        grids = [list(g) for g in trace.grids]
        record: dict[str, Any] = {
            "seconds": seconds,
            "config": config,
            "grids": grids,
            "programs": [g[0] * g[1] * g[2] for g in trace.grids],
            "traced_programs": trace.ran,
            "sites": [f.record() for f in facts],
            "program_work": program_work(trace.accesses),
            "pictures": [],
        }
        drawn_here = touched(trace.accesses, access.named_tensors(ws), PICTURED)
        for t in sorted(drawn_here, key=lambda t: -t.rows):
            if drawn >= pictures:
                break
            where = traced_at(plan, stage.name, config)
            path = access_png(t, run_dir / PICTURES / f"{stage.name}-{safe(t.name)}.png", where)
            file = str(path.relative_to(run_dir))
            record["pictures"].append({"tensor": t.name, "shape": list(t.shape), "file": file})
            drawn += 1
        stages[stage.name] = record
        write_json_atomic(
            run_dir / "tiling" / f"{stage.name}.json",
            {
                "stage": stage.name,
                "config": config,
                "grid": grids[0] if grids else None,
                "declared_kernels": list(stage.kernels),
                "tuning_source": "the first configuration of the stage's tuning space (the interpreter does not "
                "autotune)",
                "kernel": "(interpreted: no compiled kernel)",
                "interpreter": True,
            },
        )
    return stages, every


class InterpreterFailed(KbenchError):
    """Triton's interpreter could not run a stage at the traced point: it supports less than the GPU compiler (and
    some Triton and numpy versions fail on kernels the GPU runs). Not a verdict on the kernel."""

    exit_code = INTERPRETER_FAILED


def _triton() -> str:
    import triton

    return str(triton.__version__)


def check_point(cls: Any, values: dict[str, Any], seed: int) -> dict[str, Any]:
    """Step 2: the check at the plan's check parameters, every program traced, each stage's accesses labelled with
    it: the bytes each stage reaches at distinct addresses against its model at that size."""
    from kbench.analysis.access import distinct_bytes
    from kbench.capture.check import INTERPRETER, cpu_values, fixed, traced_check
    from kbench.capture.prepare import guarded

    merged, note = cpu_values(cls, {k: v for k, v in values.items() if k == "dtype"})
    plan = cls.from_values(merged)
    ws = guarded("setup", lambda: plan.setup("cpu", seed))
    prep = fixed(plan, "cpu", ws, [dict(s.tuning[0]) for s in plan.checked_stages()], _labelled)
    result, facts, _, trace = traced_check(prep, INTERPRETER, note)
    return {
        "values": plan.values(),
        "passed": result.passed,
        "line": result.line(),
        "out_of_bounds": result.out_of_bounds,
        "sites": [f.record() for f in facts],
        "distinct_bytes": distinct_bytes(trace.accesses),
        "model_bytes": {s.name: s.dram_bytes for s in plan.checked_stages()},
    }


def _labelled(name: str, fn: Any) -> Any:
    from kbench.capture import access

    def run() -> Any:
        with access.stage(name):
            return fn()

    return run


def main(spec_path: str) -> int:
    os.environ["TRITON_INTERPRET"] = "1"  # before any plan module (and Triton) is imported
    from kbench.capture.check import cpu_dtype
    from kbench.plan.discovery import load_version
    from kbench.plan.sources import record

    spec: dict[str, Any] = json.loads(Path(spec_path).read_text())
    run_dir = Path(spec["run_dir"])
    cls = load_version(spec["package"], spec["version"], spec["kernel_path"])
    values, note = cpu_dtype(cls, spec["values"])
    plan = cls.from_values(values)
    outcome: dict[str, Any] = {
        "source": record(cls.__module__),
        "requested": spec["values"],
        "values": plan.values(),
        "dtype_note": note,
        "programs_limit": spec["programs"],
        "model": {
            s.name: {"flops": s.flops, "dram_bytes": s.dram_bytes, "precision": s.precision}
            for s in plan.checked_stages()
        },
        "check": None,
    }
    outcome["stages"], facts = trace_point(plan, int(spec["seed"]), int(spec["programs"]), run_dir, MAX_PICTURES)
    # lanes out of bounds at the traced point (an offset that overflows only at this size, say) fail the run too
    from kbench.capture.check import out_of_bounds

    wild = out_of_bounds(facts)
    outcome["out_of_bounds"] = wild
    if spec["check"]:
        outcome["check"] = check_point(cls, values, int(spec["seed"]))
    write_json_atomic(run_dir / FILE, outcome)
    if outcome["check"] and not outcome["check"]["passed"]:
        print(f"{PREFIX}correctness check failed: {outcome['check']['line']}", file=sys.stderr)
        return KernelError.exit_code
    if wild:
        from kbench.analysis.access_figures import words

        print(f"{PREFIX}out of bounds at the traced point ({words(plan.values())}): {wild}", file=sys.stderr)
        return KernelError.exit_code
    return 0


BUG = 70  # the child's exit code for a bug in kbench (the parent raises it as one: the CLI's exit 70)


def run(spec_path: str) -> None:
    """The child's whole life: ``main``, a KbenchError as one line with its exit code, anything else (a bug in
    kbench) as its traceback in the log, one line and exit 70."""
    import traceback

    from kbench.capture.child import said

    try:
        code = said(main, spec_path)
    except Exception as e:
        traceback.print_exc()
        print(f"{PREFIX}kbench bug ({type(e).__name__}): {e}", file=sys.stderr)
        code = BUG
    sys.exit(code)


if __name__ == "__main__":
    run(sys.argv[1])
