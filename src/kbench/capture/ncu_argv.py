"""The exact ncu command line for a plan, built by a pure function (and tested as a list)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kbench.analysis.ncu import ANNOTATION_METRICS, ANNOTATION_SOURCE_METRICS, SCALAR_FLOPS
from kbench.nvtx import stage_range


def annotation_lines() -> bool:
    """Whether annotation mode also collects time by source line (ANNOTATION_SOURCE_METRICS); KBENCH_ANNOTATION_LINES=0:
    its short list alone (to measure what the per-line collection costs). Read per run, not at import: a resident
    kbench serves commands started with other environments."""
    return os.environ.get("KBENCH_ANNOTATION_LINES", "1") != "0"


def ncu_argv(
    ncu: Path,
    deep: bool,
    stages: Sequence[str],
    report_base: Path,
    child: Sequence[str],
    *,
    clock_control: str = "none",
    cache_control: str = "all",
    lines: bool | None = None,
) -> list[str]:
    """``deep`` False (annotation mode): a short metric list, with ``lines`` also the per-SASS instruction counts
    and warp-state samples and the source imported (time by source line); True (ncu mode): the full set with source
    import (plus the FP instruction counts the full set lacks). Only launches inside the stages' NVTX ranges are
    profiled."""
    argv = [
        str(ncu),
        "--config-file",
        "off",
        "--clock-control",
        clock_control,
        "--cache-control",
        cache_control,
        "--nvtx",
    ]
    for s in stages:
        argv += ["--nvtx-include", f"{stage_range(s)}/"]
    if deep:
        argv += ["--set", "full", "--import-source", "yes", "--metrics", ",".join(SCALAR_FLOPS)]
    elif annotation_lines() if lines is None else lines:
        argv += ["--import-source", "yes", "--metrics", ",".join((*ANNOTATION_METRICS, *ANNOTATION_SOURCE_METRICS))]
    else:
        argv += ["--metrics", ",".join(ANNOTATION_METRICS)]
    return [*argv, "--export", str(report_base), "--force-overwrite", *child]
