"""y = 3 x over fp16 vectors, x and y views of n + 8 element buffers starting OFFSET elements in; what both versions
share. They differ in OFFSET only: the kernel, block and warps are the same."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

PAD = 8  # elements beyond n in each buffer: 16 bytes, room for an offset of up to 8


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 3.0, mask=mask)


class Scale(KernelPlan):
    """y = 3 x."""

    n: int = param(1 << 28, help="elements of x and y", ge=1)
    dtype: Literal["float16"] = param("float16", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 10000}
    # where x and y start in their buffers, in elements
    OFFSET: ClassVar[int] = 0

    def stages(self) -> list[Stage]:
        n = float(self.n)
        return [
            Stage(
                "scale",
                flops=n,
                dram_bytes=4 * n,
                precision="fp16",
                build=self.build,
                tuning=[{"BLOCK": 4096, "num_warps": 8}],
                kernels=["scale_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        k = scale_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["y"], self.n, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        xbuf = torch.randn(self.n + PAD, device=device, generator=g).half()
        ybuf = torch.empty(self.n + PAD, device=device, dtype=torch.float16)
        s = slice(self.OFFSET, self.OFFSET + self.n)
        return {"x": xbuf[s], "y": ybuf[s]}  # the views keep their buffers alive

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        return 3.0 * ws["x"].double()
