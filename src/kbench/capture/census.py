"""The census of a stage's kernels (event mode): after its timings, the stage runs a few more times inside one
PyTorch-profiler session with CPU ops and CUDA activity (Kineto, CUPTI underneath), each run inside a user annotation;
kbench.analysis.census keeps the facts of that trace (never the trace itself). No L2 flush and no rests: the census
counts kernels and reads their launch facts; the stage's duration stays the CUPTI timing's.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbench.analysis.census import MARK, facts
from kbench.capture.cupti import in_session, kineto_session, profiler_failed

RUNS = 3  # runs of the stage the census records (the analysis takes the median per run)


def census(fn: Callable[[], object], runs: int = RUNS) -> dict[str, Any] | str:
    """The census record of ``runs`` calls of ``fn`` (kbench.analysis.census.facts), or why there is none."""
    try:
        import torch

        def body() -> None:
            for i in range(runs):
                with torch.autograd.profiler.record_function(f"{MARK}{i}"):
                    fn()
                torch.cuda.synchronize()  # outside the run's annotation: its API call is not the stage's

        # the CUPTI timing's session entry points (no torch.profiler import), with CPU ops for the launching op
        result = in_session(body, kineto_session(cpu=True))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "census.json"
            result.save(str(path))
            record = facts(json.loads(path.read_text()))
    except Exception as e:  # whatever the profiler raises: the census is not measured, the run goes on
        return profiler_failed(e)
    if not record["items"]:
        return "the profiler recorded no GPU work for the stage"
    if len(record.get("host_us") or []) != runs:
        return f"the profiler recorded {len(record.get('host_us') or [])} of the {runs} runs' annotations"
    return record
