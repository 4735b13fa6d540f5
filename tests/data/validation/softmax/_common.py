"""y = softmax(x) over each row of an fp32 matrix; what both versions share."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from kbench.plan.base import KernelPlan, param


class Softmax(KernelPlan):
    """y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max))."""

    rows: int = param(32768, help="rows of x", ge=1)
    cols: int = param(4096, help="columns of x (one row is held by one CTA)", ge=1, le=16384)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 4, "cols": 300}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-5}

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.rows, self.cols, device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        return ws["x"].double().softmax(dim=1)
