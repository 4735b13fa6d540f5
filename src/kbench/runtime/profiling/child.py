"""The program ncu profiles: `python -m kbench.runtime.profiling.child SPEC.json`.

It prepares the plan (allocation, autotuning through the cache, compilation, the correctness check) with no
NVTX range open, writes the stage artifacts into the run folder, then launches every stage exactly once
inside its own NVTX range, which is all ncu's filter lets through.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kbench.errors import KbenchError


def main(spec_path: str) -> int:
    import torch

    from kbench.analysis.devices import active_device
    from kbench.fsutil import write_json_atomic
    from kbench.plan.discovery import load_version
    from kbench.runtime.artifacts import write_stage
    from kbench.runtime.prepare import check, guarded
    from kbench.runtime.profiling.ncu_argv import stage_range
    from kbench.runtime.profiling.session import prepare_on_gpu

    spec: dict[str, Any] = json.loads(Path(spec_path).read_text())
    run_dir = Path(spec["run_dir"])
    plan = load_version(spec["package"], spec["version"], spec["kernel_path"]).from_values(spec["values"])
    prep = prepare_on_gpu(plan, active_device(), int(spec["seed"]))
    outcome: dict[str, Any] = {"check": None, "tiling": {}}
    if spec["check"]:
        result = check(prep, "cuda")
        outcome["check"] = {"passed": result.passed, "line": result.line()}
        if not result.passed:
            write_json_atomic(run_dir / "child.json", outcome)
            print(f"kbench child: correctness check failed: {result.line()}", file=sys.stderr)
            return 5
    outcome["tiling"] = {ps.stage.name: write_stage(run_dir, ps) for ps in prep.stages}
    torch.cuda.synchronize()
    for ps in prep.stages:
        torch.cuda.nvtx.range_push(stage_range(ps.stage.name))
        guarded(ps.stage.name, ps.launch.fn)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    write_json_atomic(run_dir / "child.json", outcome)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1]))
    except KbenchError as e:
        print(f"kbench child: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
