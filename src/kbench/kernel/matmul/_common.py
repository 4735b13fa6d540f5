"""What every matmul version shares: parameters, workspace, cost model and reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@dataclass
class Workspace:
    a: Any
    b: Any
    c: Any
    _no_profile: Any = None  # the profiler buffer of a kernel that does not record (one word; not data)


class MatmulPlan(KernelPlan):
    """C[m, n] = A[m, k] @ B[k, n]."""

    m: int = param(4096, help="rows of A and C", ge=1, le=65536)
    n: int = param(4096, help="columns of B and C", ge=1, le=65536)
    k: int = param(4096, help="inner dimension", ge=1, le=65536)
    dtype: Literal["bfloat16", "float16"] = param("bfloat16", help="element type of A, B and C")

    check_params: ClassVar[dict[str, Any]] = {"m": 130, "n": 70, "k": 96}
    KERNELS: ClassVar[list[str]] = []
    TUNING: ClassVar[list[Config]] = [{}]
    TASKS: ClassVar[tuple[str, ...]] = ()  # task names of a kernel that records them (--prof_type=intra)

    def stages(self) -> list[Stage]:
        e = self.element_bytes()
        return [
            Stage(
                "mm",
                flops=2.0 * self.m * self.n * self.k,
                dram_bytes=float(e * (self.m * self.k + self.k * self.n + self.m * self.n)),
                precision="bf16" if self.dtype == "bfloat16" else "fp16",
                build=self.build_mm,
                tuning=self.TUNING,
                kernels=self.KERNELS,
                tasks=self.TASKS,
                build_intra=self.build_mm_intra if self.TASKS else None,
            )
        ]

    def build_mm(self, ws: Workspace, cfg: Config) -> Launch:
        raise NotImplementedError

    def build_mm_intra(self, ws: Workspace, cfg: Config, profiler_buffer: Any) -> Launch:
        raise NotImplementedError

    def setup(self, device: str, seed: int) -> Workspace:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        dt = self.torch_dtype()
        a = torch.randn(self.m, self.k, device=device, generator=g).to(dt)
        b = torch.randn(self.k, self.n, device=device, generator=g).to(dt)
        return Workspace(
            a, b, torch.empty(self.m, self.n, device=device, dtype=dt), torch.zeros(1, device=device, dtype=torch.int64)
        )

    def output(self, ws: Workspace) -> Any:
        return ws.c

    def reference(self, ws: Workspace) -> Any:
        return (ws.a.double() @ ws.b.double()).to(self.torch_dtype())
