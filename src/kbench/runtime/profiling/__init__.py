"""One module per profiling mode, each exposing ``run(plan, options)`` and ``<mode>_profile_plan``; ``session``
holds what they share."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from kbench.plan.base import KernelPlan
    from kbench.report.models import ProfileResult
    from kbench.runtime.profiling.session import RunOptions

ALL_MODES = ("annotation", "event", "ncu", "nsys")


def runner_for(mode: str) -> Callable[[KernelPlan, RunOptions], ProfileResult]:
    """The function that profiles a plan in ``mode`` (imported on demand: modes pull in torch)."""
    if mode not in ALL_MODES:
        raise ValueError(f"unknown mode {mode}")
    module = importlib.import_module(f"kbench.runtime.profiling.{mode}")
    run: Callable[[KernelPlan, RunOptions], ProfileResult] = module.run
    return run
