"""kbench: profile GPU kernels against the device roofline and write a fixed-format report.

The public API is re-exported here; nothing heavy (torch, triton) is imported at import time.
Profiling functions live in ``kbench.runtime.profiling.<mode>`` (``event_profile_plan`` ...).
"""

from kbench.errors import KbenchError
from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

__version__ = "0.1.0"

__all__ = ["Config", "KbenchError", "KernelPlan", "Launch", "Stage", "__version__", "param"]
