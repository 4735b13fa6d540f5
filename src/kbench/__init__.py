"""kbench: profile GPU kernels against the device roofline and write a fixed-format report.

The public API is re-exported here and loaded on first use: nothing heavy (torch, triton, pandas, pydantic) is
imported with the package itself.
"""

from importlib import import_module

from kbench.errors import KbenchError
from kbench.version import __version__

# typing.TYPE_CHECKING's value without importing typing (nor __future__): `python -m kbench.kernel` runs this before
# it takes the working folder off sys.path (kbench.working_folder), where a typing.py could be planted
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbench.api import (
        access_profile_plan,
        annotation_profile_plan,
        event_profile_plan,
        ncu_profile_plan,
        nsys_profile_plan,
        profile_plan,
    )
    from kbench.plan.base import Config, KernelPlan, Launch, Stage, param
    from kbench.plan.discovery import load_version, with_version

# Loaded on first use, so that commands that need neither (`kbench analyze`) do not pay for pydantic models here.
_LAZY = {
    **dict.fromkeys(("Config", "KernelPlan", "Launch", "Stage", "param"), "kbench.plan.base"),
    **dict.fromkeys(("load_version", "with_version"), "kbench.plan.discovery"),
    **dict.fromkeys(
        (
            "access_profile_plan",
            "annotation_profile_plan",
            "event_profile_plan",
            "ncu_profile_plan",
            "nsys_profile_plan",
            "profile_plan",
        ),
        "kbench.api",
    ),
}

__all__ = [
    "Config",
    "KbenchError",
    "KernelPlan",
    "Launch",
    "Stage",
    "__version__",
    "access_profile_plan",
    "annotation_profile_plan",
    "event_profile_plan",
    "load_version",
    "ncu_profile_plan",
    "nsys_profile_plan",
    "param",
    "profile_plan",
    "with_version",
]


def __getattr__(name: str) -> "Any":
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kbench' has no attribute {name!r}")
