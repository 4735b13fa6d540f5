"""y = 2 x + 1 over an fp32 vector, launched as CHUNKS kernels over consecutive slices; what both versions share.
They differ in SYNC: a ``torch.cuda.synchronize()`` after each chunk, which leaves the GPU idle while the host
returns and launches the next."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def chunk_kernel(x_ptr, y_ptr, start, stop, BLOCK: tl.constexpr):
    offs = start + tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < stop
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, 2.0 * x + 1.0, mask=mask)


class HostSync(KernelPlan):
    """y = 2 x + 1 in CHUNKS launches."""

    n: int = param(1 << 22, help="elements of x and y", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 5000}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-6}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 4096, "num_warps": 8}]
    CHUNKS: ClassVar[int] = 4
    SYNC: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        n = float(self.n)
        return [
            Stage(
                "axpb",
                flops=2 * n,
                dram_bytes=8 * n,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["chunk_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        import torch

        step = triton.cdiv(self.n, self.CHUNKS)
        bounds = [(s, min(s + step, self.n)) for s in range(0, self.n, step)]
        launches = [(chunk_kernel[(triton.cdiv(b - a, cfg["BLOCK"]),)], a, b) for a, b in bounds]

        def launch() -> None:
            for k, a, b in launches:
                k(ws["x"], ws["y"], a, b, **cfg)
                if self.SYNC and ws["x"].is_cuda:  # the interpreter's CPU run has nothing to wait for
                    torch.cuda.synchronize()

        return Launch(launch, (triton.cdiv(step, cfg["BLOCK"]),))

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.n, device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        return 2.0 * ws["x"].double() + 1.0
