"""What the runtime needs to know about the GPU and the software stack (read-only)."""

from __future__ import annotations

import platform
from typing import Any

from kbench.errors import NoGpuError


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def require_cuda(what: str) -> None:
    if not cuda_available():
        raise NoGpuError(
            f"{what} needs a CUDA GPU and none is visible (torch.cuda.is_available() is False); "
            "on a CPU-only machine, `kbench check <kernel>` runs the correctness check under Triton's interpreter"
        )


def tool_versions() -> dict[str, Any]:
    import torch
    import triton

    import kbench

    return {
        "kbench": kbench.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_runtime": torch.version.cuda,
        "ncu": None,
        "nsys": None,
    }
