"""vector_add v2: the same kernel, block size and warps autotuned per device and size."""

from __future__ import annotations

from typing import ClassVar

from kbench.kernel.vector_add.base import VectorAdd
from kbench.plan.base import Config


class VectorAddTuned(VectorAdd):
    """c = a + b, autotuned over BLOCK and num_warps."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": b, "num_warps": w} for b in (1024, 2048, 4096, 8192) for w in (4, 8)]


PLAN = VectorAddTuned
