"""y[n, c, h, w] = x[n, c, h, w] * scale[c] + shift[h] + bias[w], fp32; what both versions share. ROWS: program r
handles row r (of N x C x H rows of W), else each program handles BLOCK flat elements."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def affine_nchw_kernel(x_ptr, s_ptr, t_ptr, b_ptr, y_ptr, total, C, H, W, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    if ROWS:  # one division per program: row pid is (n, c, h)
        w = tl.arange(0, BLOCK)
        mask = w < W
        offs = pid * W + w
        c = (pid // H) % C
        h = pid % H
    else:  # every element divides its flat index by the runtime sizes
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < total
        w = offs % W
        h = (offs // W) % H
        c = (offs // (W * H)) % C
    x = tl.load(x_ptr + offs, mask=mask)
    y = x * tl.load(s_ptr + c) + tl.load(t_ptr + h) + tl.load(b_ptr + w, mask=mask)
    tl.store(y_ptr + offs, y, mask=mask)


class AffineNchw(KernelPlan):
    """y = x * scale[c] + shift[h] + bias[w]."""

    n: int = param(8, help="batch", ge=1)
    c: int = param(64, help="channels", ge=1)
    h: int = param(64, help="height", ge=1)
    w: int = param(256, help="width (a power of two for rows)", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 2, "c": 3, "h": 5, "w": 16}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-5}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 4}]
    ROWS: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        total = float(self.n * self.c * self.h * self.w)
        return [
            Stage(
                "affine",
                flops=3.0 * total,
                dram_bytes=8.0 * total,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["affine_nchw_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        total = self.n * self.c * self.h * self.w
        block = triton.next_power_of_2(self.w) if self.ROWS else cfg["BLOCK"]
        grid = (self.n * self.c * self.h,) if self.ROWS else (triton.cdiv(total, block),)
        k = affine_nchw_kernel[grid]
        rest = {key: v for key, v in cfg.items() if key != "BLOCK"}
        args = (ws["x"], ws["scale"], ws["shift"], ws["bias"], ws["y"], total, self.c, self.h, self.w)
        return Launch(lambda: k(*args, ROWS=self.ROWS, BLOCK=block, **rest), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.n, self.c, self.h, self.w, device=device, generator=g)
        return {
            "x": x,
            "scale": torch.rand(self.c, device=device, generator=g),
            "shift": torch.rand(self.h, device=device, generator=g),
            "bias": torch.rand(self.w, device=device, generator=g),
            "y": torch.empty_like(x),
        }

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        s, t, b = ws["scale"].double(), ws["shift"].double(), ws["bias"].double()
        return ws["x"].double() * s[:, None, None] + t[:, None] + b
