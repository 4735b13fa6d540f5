"""y = x^T for an fp32 matrix; what both versions share."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


class Transpose(KernelPlan):
    """y[c, r] = x[r, c]."""

    rows: int = param(8192, help="rows of x", ge=1)
    cols: int = param(8192, help="columns of x", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 70, "cols": 130}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-7}
    KERNEL: ClassVar[str] = ""
    TUNING: ClassVar[list[Config]] = []

    def stages(self) -> list[Stage]:
        n = float(self.rows * self.cols)
        return [
            Stage(
                "transpose",
                flops=0.0,
                dram_bytes=8 * n,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=[self.KERNEL],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        raise NotImplementedError

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.rows, self.cols, device=device, generator=g)
        return {"x": x, "y": torch.empty(self.cols, self.rows, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        return ws["x"].double().t()
