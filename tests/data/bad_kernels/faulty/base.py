"""faulty base: a correct plan (c = a + b with torch), the others break one part of it."""

from __future__ import annotations

from typing import Any, Literal

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


class Faulty(KernelPlan):
    """c = a + b, correct."""

    n: int = param(1024, help="elements", ge=2)
    dtype: Literal["float32"] = param("float32", help="element type")

    def flops(self) -> Any:
        return float(self.n)

    def stages(self) -> list[Stage]:
        return [Stage("add", flops=self.flops(), dram_bytes=12.0 * self.n, precision="fp32", build=self.build)]

    def build(self, ws: Any, cfg: Config) -> Any:
        return Launch(lambda: ws[2].copy_(ws[0] + ws[1]))

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        a, b = (torch.randn(self.n, device=device, generator=g) for _ in range(2))
        return a, b, torch.empty_like(a)

    def output(self, ws: Any) -> Any:
        return ws[2]

    def reference(self, ws: Any) -> Any:
        return ws[0].double() + ws[1].double()


PLAN = Faulty
