"""The program a profiler runs: `python -m kbench.capture.child SPEC.json`.

It prepares the plan (allocation, autotuning through the cache, compilation, the correctness check) with no
NVTX range open and writes the stage artifacts into the run folder. Then, for ncu, it launches every stage
exactly once inside its own NVTX range ``kbench.<stage>``, which is all ncu's filter lets through; for a
timeline (nsys or the PyTorch profiler) it runs ``iterations`` iterations of the whole plan, each after an L2
flush and a synchronize, inside ``kbench:iteration`` with each stage in ``kbench.<stage>``, and before them,
for a concurrent plan, each stage alone in ``kbench:alone:<stage>``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbench.errors import KbenchError, refused_write
from kbench.nvtx import ITERATION, alone_range, stage_range

if TYPE_CHECKING:
    from kbench.capture.prepare import Prepared
    from kbench.plan.base import KernelPlan

SPEC = "child-spec.json"
OUTCOME = "child.json"
TORCH_TRACE = "pytorch_trace.json"
PREFIX = "kbench child: "
WARMUP = 3  # whole-plan runs before a timeline is recorded (side streams made, caches warm)
AUDIT_REPS = 20  # CUDA-event repetitions per stage for the cross-tool audit (annotation and ncu modes)


def command(
    plan: KernelPlan, run_dir: Path, seed: int, check: bool, module: str = "kbench.capture.child", **program: Any
) -> list[str]:
    """Write the child's spec into the run folder and return the argv that runs it (``module``: this program, or
    another that reads the same spec). ``program``: what to do after preparing (nothing: each stage once, for ncu;
    ``program="timeline"``, ``backend``, ``iterations``)."""
    from kbench.fsutil import write_json_atomic

    loaded = sys.modules[type(plan).__module__]
    shipped = type(plan).__module__.startswith("kbench.")
    spec = {
        "package": plan.package,
        "version": plan.version,
        "values": plan.values(),
        "seed": seed,
        "check": check,
        "run_dir": str(run_dir),
        # the folder a user plan came from, so the child finds it too
        "kernel_path": [] if shipped else [str(Path(loaded.__file__ or "").parent.parent)],
        **program,
    }
    write_json_atomic(run_dir / SPEC, spec)
    from kbench.capture.tools import python_module

    return python_module(module, str(run_dir / SPEC))


def reported(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the child wrote of its run (child.json): a Capture's fields from it (the correctness check's line, the
    tiling, the source it loaded), and the whole of it (the ncu audit too)."""
    outcome: dict[str, Any] = json.loads((run_dir / OUTCOME).read_text())
    check = outcome["check"]
    fields = {"check": check["line"] if check else None, "tiling": outcome["tiling"], "source": outcome.get("source")}
    return fields, outcome


def failure(log: str) -> str | None:
    """The child's own one-line error in a profiler's log (the plan failed, not the profiler), if any."""
    lines = [line.removeprefix(PREFIX) for line in log.splitlines() if line.startswith(PREFIX)]
    return lines[-1] if lines else None


@contextmanager
def marked(name: str) -> Iterator[None]:
    """An NVTX range (what nsys records) that is also a PyTorch-profiler annotation (what CUPTI traces show)."""
    import torch

    torch.cuda.nvtx.range_push(name)
    try:
        with torch.profiler.record_function(name):
            yield
    finally:
        torch.cuda.nvtx.range_pop()


def once_per_stage(prep: Prepared) -> None:
    from kbench.capture.prepare import guarded

    for ps in prep.stages:
        with marked(stage_range(ps.stage.name)):
            guarded(ps.stage.name, ps.launch.fn)


def timeline(prep: Prepared, iterations: int, backend: str, run_dir: Path) -> None:
    import torch

    from kbench.capture.prepare import guarded
    from kbench.capture.timing import L2Flush, l2_flush_bytes

    flush = L2Flush(l2_flush_bytes())
    for _ in range(WARMUP):
        prep.run_all()
    torch.cuda.synchronize()

    def fresh() -> None:  # every run starts on an idle GPU with a cold L2
        flush()
        torch.cuda.synchronize()

    profiler: Any = nullcontext()
    if backend == "torch":
        from torch.profiler import ProfilerActivity, profile

        profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    with profiler as prof:
        if prep.plan.concurrent():
            for ps in prep.stages:
                for _ in range(iterations):
                    fresh()
                    with marked(alone_range(ps.stage.name)):
                        guarded(ps.stage.name, ps.launch.fn)
        for _ in range(iterations):
            fresh()
            with marked(ITERATION):
                prep.run_all(around=lambda name: marked(stage_range(name)))
        torch.cuda.synchronize()
    if prof is not None:
        prof.export_chrome_trace(str(run_dir / TORCH_TRACE))


def main(spec_path: str) -> int:
    from kbench.capture import warmup

    warmup.start(context=True)  # NVML, the driver and the context made while torch imports
    import torch

    from kbench.capture.artifacts import write_stage
    from kbench.capture.gpu import active_device
    from kbench.capture.prepare import check, prepare_on_gpu
    from kbench.fsutil import write_json_atomic
    from kbench.plan.discovery import load_version
    from kbench.plan.sources import record

    spec: dict[str, Any] = json.loads(Path(spec_path).read_text())
    run_dir = Path(spec["run_dir"])
    plan = load_version(spec["package"], spec["version"], spec["kernel_path"]).from_values(spec["values"])
    # the source this process loaded: the files may have been edited since the parent loaded them
    outcome: dict[str, Any] = {"check": None, "tiling": {}, "source": record(type(plan).__module__)}
    prep = prepare_on_gpu(plan, active_device(), int(spec["seed"]))
    if spec["check"]:
        result = check(prep, "cuda")
        outcome["check"] = {"passed": result.passed, "line": result.line()}
        if not result.passed:
            write_json_atomic(run_dir / OUTCOME, outcome)
            print(f"{PREFIX}correctness check failed: {result.line()}", file=sys.stderr)
            return 5
    outcome["tiling"] = {ps.stage.name: write_stage(run_dir, ps) for ps in prep.stages}
    torch.cuda.synchronize()
    if spec.get("audit"):  # CUDA events in this process, outside every NVTX range ncu profiles: the cross-tool audit
        from kbench.capture.timing import time_cuda

        outcome["audit"] = {ps.stage.name: time_cuda(ps.launch.fn, AUDIT_REPS).us for ps in prep.stages}
    if spec.get("program") == "timeline":
        timeline(prep, int(spec["iterations"]), str(spec["backend"]), run_dir)
    else:
        once_per_stage(prep)
    torch.cuda.synchronize()
    write_json_atomic(run_dir / OUTCOME, outcome)
    return 0


def leaves_at_once(spec: dict[str, Any]) -> bool:
    """Whether the child may end with ``os._exit`` once its work is written, skipping the interpreter's and CUDA's
    teardown: 0.4-0.6 s on the H100 machine, under ncu from the plan's return to ncu's report (5.23 -> 5.96 s of a
    6.0 s ncu run, against 5.13 -> 5.36 s, the same kernels in the report). Not under nsys: Nsight Systems collects
    its trace buffers at the process's orderly exit."""
    return spec.get("program") != "timeline" or spec.get("backend") == "torch"


def said(program: Callable[[str], int], spec_path: str) -> int:
    """``program``'s exit code; a KbenchError it raises, or a write the machine refused (a full disk: as kbench's own
    process says it), as one line (PREFIX: ``failure`` finds it) and its code."""
    try:
        return program(spec_path)
    except OSError as e:
        if (refused := refused_write(e)) is None:
            raise
        print(f"{PREFIX}{refused}", file=sys.stderr)
        return refused.exit_code
    except KbenchError as e:
        print(f"{PREFIX}{e}", file=sys.stderr)
        return e.exit_code


def run(spec_path: str) -> None:
    """The child's whole life: ``main``, then the exit (at once where ``leaves_at_once``), a KbenchError as one line."""
    code = said(main, spec_path)
    if code == 0 and leaves_at_once(json.loads(Path(spec_path).read_text())):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    sys.exit(code)


if __name__ == "__main__":
    run(sys.argv[1])
