"""faulty base: a correct plan (y = 2x with torch); the other versions each break one part of it."""

from __future__ import annotations

from typing import Any, Literal

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


class Faulty(KernelPlan):
    """y = 2x, correct."""

    n: int = param(1024, help="elements", ge=2)
    dtype: Literal["float32"] = param("float32", help="element type")

    def flops(self) -> Any:
        return float(self.n)

    def stages(self) -> list[Stage]:
        return [Stage("double", flops=self.flops(), dram_bytes=8.0 * self.n, precision="fp32", build=self.build)]

    def build(self, ws: Any, cfg: Config) -> Any:
        return Launch(lambda: ws["y"].copy_(ws["x"] * 2))

    def setup(self, device: str, seed: int) -> Any:
        import torch

        x = torch.randn(self.n, device=device, generator=torch.Generator(device=device).manual_seed(seed))
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        return 2 * ws["x"].double()


PLAN = Faulty
