"""scale v1: one program per BLOCK elements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

V1_BLOCK = 256  # the version's block size


@triton.jit
def scale_v1_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@dataclass
class Workspace:
    x: Any
    y: Any


class ScaleV1(KernelPlan):
    """y = 2x over n float32 elements (v1)."""

    n: int = param(4096, help="number of elements", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 1000}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": V1_BLOCK}]

    def stages(self) -> list[Stage]:
        return [
            Stage(
                "scale",
                flops=float(self.n),
                dram_bytes=8.0 * self.n,
                precision="fp32",
                build=self._build,
                tuning=self.TUNING,
                kernels=["scale_v1_kernel"],
            )
        ]

    def _build(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        return Launch(lambda: scale_v1_kernel[grid](ws.x, ws.y, self.n, **cfg), grid)

    def setup(self, device: str, seed: int) -> Workspace:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.n, device=device, generator=g)
        return Workspace(x, torch.empty_like(x))

    def output(self, ws: Workspace) -> Any:
        return ws.y

    def reference(self, ws: Workspace) -> Any:
        return ws.x * 2.0


PLAN = ScaleV1
