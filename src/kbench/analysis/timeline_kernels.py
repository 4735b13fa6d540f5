"""The kernels of each stage in a timeline (nsys mode: an Nsight Systems export or the PyTorch profiler's trace):
per kernel name, its launches and GPU time per run of the stage (medians over the stage's runs), and the grid,
block, registers and shared memory the GPU ran it with (CUPTI's kernel records). Pure."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kbench.analysis.kernels import StageKernel, StageKernels, is_declared, shares
from kbench.analysis.timeline_index import known

if TYPE_CHECKING:
    import pandas as pd

    from kbench.analysis.timeline_stages import TimelineAnalysis


def source_of(path_suffix: str) -> str:
    """What saw the kernels: Nsight Systems (an .sqlite export), or CUPTI through the PyTorch profiler."""
    return "nsys" if path_suffix == ".sqlite" else "CUPTI"


def _dims(value: Any) -> list[int] | None:
    return [int(v) for v in value] if isinstance(value, list | tuple) and value else None


def _count(value: Any) -> int | None:
    return int(value) if known(value) else None


def stage_kernels(
    table: pd.DataFrame, analysis: TimelineAnalysis, declared: Mapping[str, Sequence[str]], source: str
) -> dict[str, StageKernels]:
    """Each stage's kernels, largest first, from its runs inside iterations of the plan (``declared``: the plan's
    kernel names per stage, to tell a kernel the plan never declared)."""
    out: dict[str, StageKernels] = {}
    for stage in analysis.stages:
        runs = [o.rows for o in analysis.occurrences if o.stage == stage.stage and o.phase == "together"]
        kernels = kernels_of(table, runs, declared.get(stage.stage, ()), source)
        out[stage.stage] = StageKernels(stage=stage.stage, kernels=kernels)
    return out


def kernels_of(
    table: pd.DataFrame, runs: Sequence[Sequence[int]], declared: Sequence[str], source: str
) -> list[StageKernel]:
    """The kernels of one stage by name, largest first, from its runs (each the table rows of the kernels one run
    launched): launches and time per run (medians over the runs), the launch facts of its first launch."""
    grid, block = table["grid"].tolist(), table["block"].tolist()
    regs, smem, names = table["registers"].tolist(), table["shared_bytes"].tolist(), table["name"].tolist()
    start, end = table["start_ns"].tolist(), table["end_ns"].tolist()
    first: dict[str, int] = {}  # kernel name -> its first row (the launch facts it ran with)
    per_run: list[dict[str, tuple[int, int]]] = []  # per run: name -> (launches, summed ns)
    for rows in runs:
        mine: dict[str, tuple[int, int]] = {}
        for i in rows:
            name = str(names[i])
            first.setdefault(name, i)
            n, ns = mine.get(name, (0, 0))
            mine[name] = (n + 1, ns + int(end[i]) - int(start[i]))
        per_run.append(mine)
    return shares(
        [
            StageKernel(
                name=name,
                launches=statistics.median(r.get(name, (0, 0))[0] for r in per_run),
                us=statistics.median(r.get(name, (0, 0))[1] for r in per_run) / 1e3,
                grid=_dims(grid[i]),
                block=_dims(block[i]),
                registers=_count(regs[i]),
                shared_bytes=_count(smem[i]),
                declared=is_declared(name, declared),
                source=source,
            )
            for name, i in first.items()
        ]
    )
