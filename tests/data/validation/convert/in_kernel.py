"""convert in_kernel: the kernel loads bf16 and converts in registers."""

from __future__ import annotations

from ._common import Convert


class InKernel(Convert):
    """the conversion inside the kernel's load."""


PLAN = InKernel
