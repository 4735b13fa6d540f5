"""y_i = sum_{t<T} x[(i + t) mod n] (fp32, periodic); what both versions share. WRAP_BY_MOD: the index wrapped by
``%`` with the runtime n (an integer division sequence per tap), else by a compare and a subtraction (t < n)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def window_kernel(x_ptr, y_ptr, n, T: tl.constexpr, WRAP_BY_MOD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for t in range(T):
        idx = offs + t
        if WRAP_BY_MOD:  # noqa: SIM108 (a compile-time branch: each version compiles one wrap)
            idx = idx % n
        else:
            idx = tl.where(idx >= n, idx - n, idx)
        acc += tl.load(x_ptr + idx, mask=mask, other=0.0)
    tl.store(y_ptr + offs, acc, mask=mask)


class Window(KernelPlan):
    """y_i = sum_{t<T} x[(i + t) mod n]."""

    n: int = param((1 << 22) + 3, help="elements of x and y (not a power of two)", ge=1)
    taps: int = param(32, help="window length T", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 5003, "taps": 32}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-5}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 4}]
    WRAP_BY_MOD: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        n, t = float(self.n), float(self.taps)
        return [
            Stage(
                "window",
                flops=n * t,
                dram_bytes=8 * n,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["window_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        k = window_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["y"], self.n, T=self.taps, WRAP_BY_MOD=self.WRAP_BY_MOD, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.n, device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        import torch

        x = ws["x"].double()
        return sum(torch.roll(x, -t) for t in range(self.taps))
