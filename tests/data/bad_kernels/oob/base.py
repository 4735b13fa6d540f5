"""oob base: shipped vector_add base with one planted bug: the load of b masks 64 lanes too late (reads past b)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=offs < n + 64)  # the planted bug
    # add in fp32 whatever the storage type: the stage's precision is fp32 CUDA-core work
    tl.store(c_ptr + offs, (a.to(tl.float32) + b.to(tl.float32)).to(c_ptr.dtype.element_ty), mask=mask)


@dataclass
class Workspace:
    a: Any
    b: Any
    c: Any


class VectorAddOob(KernelPlan):
    """c = a + b over n elements."""

    n: int = param(1 << 26, help="number of elements", ge=1, le=1 << 31)
    dtype: Literal["float32", "float16", "bfloat16"] = param("float32", help="element type of a, b and c")

    check_params: ClassVar[dict[str, Any]] = {"n": 5003}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 4}]

    def stages(self) -> list[Stage]:
        return [
            Stage(
                "add",
                flops=float(self.n),
                dram_bytes=3.0 * self.n * self.element_bytes(),
                precision="fp32",
                build=self._build_add,
                tuning=self.TUNING,
                kernels=["add_kernel"],
            )
        ]

    def _build_add(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        kernel = add_kernel[grid]
        return Launch(lambda: kernel(ws.a, ws.b, ws.c, self.n, **cfg), grid)

    def setup(self, device: str, seed: int) -> Workspace:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        a, b = (torch.randn(self.n, device=device, generator=g).to(self.torch_dtype()) for _ in range(2))
        return Workspace(a, b, torch.empty_like(a))

    def output(self, ws: Workspace) -> Any:
        return ws.c

    def reference(self, ws: Workspace) -> Any:
        return (ws.a.double() + ws.b.double()).to(self.torch_dtype())


PLAN = VectorAddOob
