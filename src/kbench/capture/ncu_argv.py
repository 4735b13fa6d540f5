"""The exact ncu command line for a plan, built by a pure function (and tested as a list)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kbench.analysis.ncu import ANNOTATION_METRICS, SCALAR_FLOPS
from kbench.nvtx import stage_range


def ncu_argv(
    ncu: Path,
    deep: bool,
    stages: Sequence[str],
    report_base: Path,
    child: Sequence[str],
    *,
    clock_control: str = "none",
    cache_control: str = "all",
) -> list[str]:
    """``deep`` False (annotation mode): a short metric list; True (ncu mode): the full set with source import (plus
    the FP instruction counts the full set lacks). Only launches inside the stages' NVTX ranges are profiled."""
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
    else:
        argv += ["--metrics", ",".join(ANNOTATION_METRICS)]
    return [*argv, "--export", str(report_base), "--force-overwrite", *child]
