"""broken base: its launch raises, as a crashing kernel would."""

from __future__ import annotations

from typing import Any, Literal

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


class Broken(KernelPlan):
    """A stage whose launch fails."""

    n: int = param(1024, help="elements", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    def stages(self) -> list[Stage]:
        return [Stage("boom", flops=float(self.n), dram_bytes=8.0 * self.n, precision="fp32", build=self._build)]

    def _build(self, ws: Any, cfg: Config) -> Launch:
        def launch() -> None:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

        return Launch(launch)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        return torch.zeros(self.n, device=device)

    def output(self, ws: Any) -> Any:
        return ws

    def reference(self, ws: Any) -> Any:
        return ws.double()


PLAN = Broken
