"""epilogue before: two kernels in one stage: gemm_kernel stores the fp32 products A @ B to the workspace's `acc`
(4 bytes an element: 277 MB at the defaults), epilogue_kernel reads them back with bias and writes gelu(...) as fp16
C. The GEMM is tiled for wgmma (128 x 128 x 64, 8 warps, 3 stages); the distance is the products' round trip and the
second kernel's time. Fix: the epilogue in the GEMM's store (after)."""

from __future__ import annotations

from typing import Any, ClassVar

from kbench.plan.base import Config, Launch

from ._common import TWO_C_LOG2E, GemmGelu, epilogue_kernel


class Before(GemmGelu):
    """GEMM to DRAM, then bias + gelu."""

    KERNELS: ClassVar[list[str]] = ["gemm_kernel", "epilogue_kernel"]

    def scratch(self, device: str) -> dict[str, Any]:
        import torch

        return {"acc": torch.empty(self.m, self.n, device=device, dtype=torch.float32)}

    def build(self, ws: Any, cfg: Config) -> Launch:
        gemm, grid = self.gemm(ws, cfg, ws["acc"], fused=False)
        block = self.EPILOGUE_BLOCK
        epi = epilogue_kernel[(self.m, self.n // block)]

        def launch() -> None:
            gemm()
            epi(ws["acc"], ws["bias"], ws["c"], self.n, BLOCK=block, TWO_C_LOG2E=TWO_C_LOG2E, num_warps=8)

        return Launch(launch, grid)


PLAN = Before
