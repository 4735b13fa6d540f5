"""matmul torch_mm: the baseline, torch.mm (cuBLAS on a GPU)."""

from kbench.kernel.matmul._common import MatmulPlan, Workspace
from kbench.plan.base import Config, Launch


class MatmulTorch(MatmulPlan):
    """C = torch.mm(A, B)."""

    def build_mm(self, ws: Workspace, cfg: Config) -> Launch:
        import torch

        return Launch(lambda: torch.mm(ws.a, ws.b, out=ws.c))


PLAN = MatmulTorch
