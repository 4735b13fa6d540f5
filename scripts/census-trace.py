"""Real PyTorch-profiler traces of plan stages, for the CPU tests of issue 42's kernel census: each stage of each
given plan (default parameters, first tuning config) run RUNS times inside one profiler session with CPU ops and
CUDA activity, exported as a gzipped Chrome trace (kernel args: grid, block, registers, shared memory, correlation,
External id; the runtime and driver API calls).
Usage (a CUDA GPU): PYTHONPATH=src python3 scripts/census-trace.py OUT_DIR KERNEL_PATH PKG:VERSION ..."""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from kbench.plan.discovery import load_version

RUNS = 3


def main(out: Path, path: str, specs: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for spec in specs:
        package, version = spec.split(":")
        plan = load_version(package, version, [path])()
        ws = plan.setup("cuda", 0)
        for stage in plan.checked_stages():
            fn = stage.build(ws, dict(stage.tuning[0])).fn
            for _ in range(2):  # compile and warm up outside the trace
                fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(RUNS):
                    fn()
                torch.cuda.synchronize()
            with tempfile.TemporaryDirectory() as tmp:
                raw = Path(tmp) / "trace.json"
                prof.export_chrome_trace(str(raw))
                target = out / f"{package}-{version}-{stage.name}.trace.json.gz"
                with raw.open("rb") as src, gzip.open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            print(f"{target.name}: {target.stat().st_size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
