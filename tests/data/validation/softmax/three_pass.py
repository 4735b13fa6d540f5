"""softmax three_pass: a row max, a sum of exp and a normalization, each its own kernel over the whole matrix
(x is read three times; the row maxima and sums go through DRAM)."""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch, Stage

from ._common import Softmax


@triton.jit
def row_max_kernel(x_ptr, m_ptr, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * cols + offs, mask=offs < cols, other=-float("inf"))
    tl.store(m_ptr + r, tl.max(x, axis=0))


@triton.jit
def row_sum_exp_kernel(x_ptr, m_ptr, s_ptr, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * cols + offs, mask=offs < cols, other=-float("inf"))
    tl.store(s_ptr + r, tl.sum(tl.exp(x - tl.load(m_ptr + r)), axis=0))


@triton.jit
def normalize_kernel(x_ptr, m_ptr, s_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * cols + offs, mask=offs < cols, other=-float("inf"))
    y = tl.exp(x - tl.load(m_ptr + r)) / tl.load(s_ptr + r)
    tl.store(y_ptr + r * cols + offs, y, mask=offs < cols)


class ThreePass(Softmax):
    """max, sum of exp, normalize: three kernels."""

    def stages(self) -> list[Stage]:
        n, r = float(self.rows * self.cols), float(self.rows)
        tuning = [{"num_warps": 8}]
        return [
            Stage(
                "max",
                flops=n,
                dram_bytes=4 * (n + r),
                precision="fp32",
                build=self.build_max,
                tuning=tuning,
                kernels=["row_max_kernel"],
            ),
            Stage(
                "sum",
                flops=3 * n,
                dram_bytes=4 * (n + 2 * r),
                precision="fp32",
                build=self.build_sum,
                tuning=tuning,
                kernels=["row_sum_exp_kernel"],
            ),
            Stage(
                "norm",
                flops=3 * n,
                dram_bytes=4 * (2 * n + 2 * r),
                precision="fp32",
                build=self.build_norm,
                tuning=tuning,
                kernels=["normalize_kernel"],
            ),
        ]

    def setup(self, device: str, seed: int) -> Any:
        import torch

        ws = super().setup(device, seed)
        return {**ws, "m": torch.empty(self.rows, device=device), "s": torch.empty(self.rows, device=device)}

    def _per_row(self, kernel: Any, ws: Any, cfg: Config, *tensors: str) -> Launch:
        """One CTA per row holding the whole row: ``kernel(*tensors, cols)``."""
        k, block, args = kernel[(self.rows,)], triton.next_power_of_2(self.cols), [ws[t] for t in tensors]
        return Launch(lambda: k(*args, self.cols, BLOCK=block, **cfg), (self.rows,))

    def build_max(self, ws: Any, cfg: Config) -> Launch:
        return self._per_row(row_max_kernel, ws, cfg, "x", "m")

    def build_sum(self, ws: Any, cfg: Config) -> Launch:
        return self._per_row(row_sum_exp_kernel, ws, cfg, "x", "m", "s")

    def build_norm(self, ws: Any, cfg: Config) -> Launch:
        return self._per_row(normalize_kernel, ws, cfg, "x", "m", "s", "y")


PLAN = ThreePass
