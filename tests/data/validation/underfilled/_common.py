"""out[r] = sum of x[r, :], fp32; what both versions share."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


class RowSum(KernelPlan):
    """out[r] = sum(x[r, :])."""

    rows: int = param(16, help="rows of x", ge=1)
    cols: int = param(1 << 23, help="columns of x", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 3, "cols": 5000}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-4}
    KERNEL: ClassVar[str] = ""

    def stages(self) -> list[Stage]:
        n = self.rows * self.cols
        return [
            Stage(
                "rowsum",
                flops=float(n),
                dram_bytes=4.0 * (n + self.rows),
                precision="fp32",
                build=self.build,
                tuning=[{"BLOCK": 4096, "num_warps": 8}],
                kernels=[self.KERNEL],
            )
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        raise NotImplementedError

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.rows, self.cols, device=device, generator=g)
        return {"x": x, "out": torch.empty(self.rows, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        return ws["x"].double().sum(dim=1)
