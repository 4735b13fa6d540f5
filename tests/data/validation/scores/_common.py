"""O = softmax(Q K^T / sqrt(d)) V for each of BH (batch x head) slices, N queries = N keys, head width d, fp16
(fp32 accumulation). What both versions share: the plan, the cost model (the attention's FLOPs; Q, K, V read and O
written once), the online-softmax step and the kernels. `before` runs scores_kernel (S = Q K^T, scaled, to the
workspace's fp16 `scores` [BH, N, N]) then softmax_pv_kernel (S read back in row blocks, online softmax, P V);
`after` runs flash_kernel, which computes each S tile with tl.dot and never writes it."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import triton
import triton.language as tl
from pydantic import model_validator

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def online_step(acc, m_i, l_i, s, v):  # type: ignore[no-untyped-def]
    """One key block of the online softmax: s [BLOCK_M, BLOCK_N] fp32 scores in log2 units, v [BLOCK_N, D] fp16."""
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
    return acc, m_new, l_i


@triton.jit
def scores_kernel(q_ptr, k_ptr, s_ptr, n, qk_scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr):  # fmt: skip
    """S[bh, rows of this block, :] = Q K^T x qk_scale (1/sqrt(d) x log2(e)), stored fp16."""
    bh = tl.program_id(1).to(tl.int64)
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + bh * n * D + rm[:, None] * D + rd[None, :])
    s_rows = s_ptr + bh * n * n + rm[:, None].to(tl.int64) * n
    for n0 in range(0, n, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + bh * n * D + rn[None, :] * D + rd[:, None])
        tl.store(s_rows + rn[None, :], (tl.dot(q, kt) * qk_scale).to(tl.float16))


@triton.jit
def softmax_pv_kernel(s_ptr, v_ptr, o_ptr, n, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """O for one block of rows from the stored scores: online softmax over S's key blocks, P V on the tensor cores."""
    bh = tl.program_id(1).to(tl.int64)
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    s_rows = s_ptr + bh * n * n + rm[:, None].to(tl.int64) * n
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for n0 in range(0, n, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        s = tl.load(s_rows + rn[None, :]).to(tl.float32)
        v = tl.load(v_ptr + bh * n * D + rn[:, None] * D + rd[None, :])
        acc, m_i, l_i = online_step(acc, m_i, l_i, s, v)
    tl.store(o_ptr + bh * n * D + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(tl.float16))


@triton.jit
def flash_kernel(q_ptr, k_ptr, v_ptr, o_ptr, n, qk_scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr):  # fmt: skip
    """O for one block of rows, each S tile computed by tl.dot and consumed on chip."""
    bh = tl.program_id(1).to(tl.int64)
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + bh * n * D + rm[:, None] * D + rd[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for n0 in range(0, n, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + bh * n * D + rn[None, :] * D + rd[:, None])
        v = tl.load(v_ptr + bh * n * D + rn[:, None] * D + rd[None, :])
        acc, m_i, l_i = online_step(acc, m_i, l_i, tl.dot(q, kt) * qk_scale, v)
    tl.store(o_ptr + bh * n * D + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(tl.float16))


class Attention(KernelPlan):
    """O = softmax(Q K^T / sqrt(d)) V over bh slices of n x d, non-causal."""

    bh: int = param(66, help="batch x heads: independent attention slices", ge=1, le=4096)
    n: int = param(2048, help="sequence length (queries = keys), a multiple of 128", ge=128, le=1 << 16)
    d: Literal[64] = param(64, help="head width")
    dtype: Literal["float16"] = param("float16", help="element type of Q, K, V and O")

    check_params: ClassVar[dict[str, Any]] = {"bh": 2, "n": 256}
    TILE: ClassVar[Config] = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}
    KERNELS: ClassVar[list[str]] = []

    @model_validator(mode="after")
    def _whole_blocks(self) -> Attention:
        if self.n % 128:
            raise ValueError(f"n={self.n}: the kernels take whole 128-row blocks (no masks)")
        return self

    @property
    def qk_scale(self) -> float:
        return math.log2(math.e) / math.sqrt(self.d)  # softmax through exp2: 1/sqrt(d) and log2(e) in one factor

    def stages(self) -> list[Stage]:
        bh, n, d = float(self.bh), float(self.n), float(self.d)
        return [
            Stage(
                "attention",
                flops=4.0 * bh * n * n * d,  # Q K^T and P V
                dram_bytes=2.0 * 4 * bh * n * d,  # Q, K, V read once, O written once (fp16)
                precision="fp16",
                build=self.build,
                tuning=[self.TILE],
                kernels=self.KERNELS,
            )
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        raise NotImplementedError

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        shape = (self.bh, self.n, self.d)
        return {
            "q": torch.randn(shape, device=device, generator=g).half(),
            "k": torch.randn(shape, device=device, generator=g).half(),
            "v": torch.randn(shape, device=device, generator=g).half(),
            "o": torch.empty(shape, device=device, dtype=torch.float16),
            **self.scratch(device),
        }

    def scratch(self, device: str) -> dict[str, Any]:
        """Workspace tensors a version adds (the score matrix of `before`)."""
        return {}

    def output(self, ws: Any) -> Any:
        return ws["o"]

    def reference(self, ws: Any) -> Any:
        import torch

        q, k, v = (ws[x].double() for x in ("q", "k", "v"))
        return torch.softmax(q @ k.transpose(1, 2) / math.sqrt(self.d), dim=-1) @ v
