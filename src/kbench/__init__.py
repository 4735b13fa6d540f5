"""kbench: profile GPU kernels against the device roofline and write a fixed-format report.

The public API is re-exported here; nothing heavy (torch, triton, pandas) is imported at import time: the
profiling functions (``event_profile_plan``, ``annotation_profile_plan``, ``ncu_profile_plan``,
``nsys_profile_plan``, ``profile_plan``) load ``kbench.api`` on first use.
"""

from typing import Any

from kbench.errors import KbenchError
from kbench.plan.base import Config, KernelPlan, Launch, Stage, param
from kbench.plan.discovery import load_version, with_version
from kbench.version import __version__

_API = ("annotation_profile_plan", "event_profile_plan", "ncu_profile_plan", "nsys_profile_plan", "profile_plan")

__all__ = [
    "Config",
    "KbenchError",
    "KernelPlan",
    "Launch",
    "Stage",
    "__version__",
    "annotation_profile_plan",
    "event_profile_plan",
    "load_version",
    "ncu_profile_plan",
    "nsys_profile_plan",
    "param",
    "profile_plan",
    "with_version",
]


def __getattr__(name: str) -> Any:
    if name in _API:
        from kbench import api

        return getattr(api, name)
    raise AttributeError(f"module 'kbench' has no attribute {name!r}")
