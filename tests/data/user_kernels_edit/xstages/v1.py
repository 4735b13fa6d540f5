"""xstages v1: y = 2x, with nothing of _common."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def scale_v1_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


class XstagesV1(KernelPlan):
    """y = 2x over n float32 elements (v1)."""

    n: int = param(4096, help="number of elements", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 1000}
    KERNEL: ClassVar[Any] = scale_v1_kernel
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 256, "num_warps": 4, "num_stages": 4}]

    def stages(self) -> list[Stage]:
        cost = {"flops": float(self.n), "dram_bytes": 8.0 * self.n, "precision": "fp32"}
        return [Stage("scale", build=self._build, tuning=self.TUNING, kernels=[self.KERNEL.__name__], **cost)]

    def _build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        return Launch(lambda: self.KERNEL[grid](ws[0], ws[1], self.n, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        x = torch.randn(self.n, device=device, generator=torch.Generator(device=device).manual_seed(seed))
        return x, torch.empty_like(x)

    def output(self, ws: Any) -> Any:
        return ws[1]

    def reference(self, ws: Any) -> Any:
        return ws[0] * 2.0


PLAN = XstagesV1
