"""wrong base: computes a instead of a + b."""

from __future__ import annotations

from typing import Any, Literal

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


class Wrong(KernelPlan):
    """c = a (should be a + b)."""

    n: int = param(4099, help="elements", ge=2)
    dtype: Literal["float32"] = param("float32", help="element type")

    def stages(self) -> list[Stage]:
        return [Stage("add", flops=float(self.n), dram_bytes=12.0 * self.n, precision="fp32", build=self.build)]

    def build(self, ws: Any, cfg: Config) -> Launch:
        return Launch(lambda: ws[2].copy_(ws[0]))

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        a, b = (torch.randn(self.n, device=device, generator=g) for _ in range(2))
        return a, b, torch.empty_like(a)

    def output(self, ws: Any) -> Any:
        return ws[2]

    def reference(self, ws: Any) -> Any:
        return ws[0].double() + ws[1].double()


PLAN = Wrong
