"""Decode attention: for each of BH (batch x head) queries q [d], O = softmax(q K^T / sqrt(d)) V over its T keys and
values (fp16, d = 128, fp32 arithmetic on the CUDA cores: one query row is no tensor-core tile). What both versions
share: the plan, the cost model (q, K, V read and O written once) and the kernels. decode_kernel runs one program per
(query, chunk of T / SPLITS keys): with SPLITS = 1 it writes O; else it writes the chunk's unnormalized fp32 output,
running max and sum to the workspace's `partials` and `stats`, which combine_kernel merges into O."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import triton
import triton.language as tl
from pydantic import model_validator

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def decode_kernel(q_ptr, k_ptr, v_ptr, o_ptr, part_ptr, stats_ptr, T, t_per, qk_scale, D: tl.constexpr,
                  BLOCK_T: tl.constexpr, SPLITS: tl.constexpr):  # fmt: skip
    bh = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + bh * D + rd).to(tl.float32) * qk_scale  # 1/sqrt(d) and log2(e): softmax through exp2
    kv = bh * T * D
    # BLOCK_T running softmaxes, one per key row of the tile, merged after the loop: no cross-warp reduction in it
    m_i = tl.full([BLOCK_T], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_T], dtype=tl.float32)
    acc = tl.zeros([BLOCK_T, D], dtype=tl.float32)
    for t0 in range(split * t_per, (split + 1) * t_per, BLOCK_T):
        rt = t0 + tl.arange(0, BLOCK_T)
        k = tl.load(k_ptr + kv + rt[:, None] * D + rd[None, :])
        v = tl.load(v_ptr + kv + rt[:, None] * D + rd[None, :])
        s = tl.sum(k.to(tl.float32) * q[None, :], axis=1)
        m_new = tl.maximum(m_i, s)
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new)
        l_i = l_i * alpha + p
        acc = acc * alpha[:, None] + p[:, None] * v.to(tl.float32)
        m_i = m_new
    m = tl.max(m_i, axis=0)
    w = tl.math.exp2(m_i - m)
    out = tl.sum(acc * w[:, None], axis=0)
    total = tl.sum(l_i * w, axis=0)
    if SPLITS == 1:
        tl.store(o_ptr + bh * D + rd, (out / total).to(tl.float16))
    else:
        row = bh * SPLITS + split
        tl.store(part_ptr + row * D + rd, out)
        two = tl.arange(0, 2)
        tl.store(stats_ptr + row * 2 + two, tl.where(two == 0, m, total))


@triton.jit
def combine_kernel(part_ptr, stats_ptr, o_ptr, D: tl.constexpr, SPLITS: tl.constexpr):
    """O of one query from its SPLITS chunks: each chunk's output and sum rescaled to the largest max."""
    bh = tl.program_id(0).to(tl.int64)
    rs = tl.arange(0, SPLITS)
    rd = tl.arange(0, D)
    m = tl.load(stats_ptr + (bh * SPLITS + rs) * 2)
    w = tl.math.exp2(m - tl.max(m, axis=0))
    l_i = tl.sum(tl.load(stats_ptr + (bh * SPLITS + rs) * 2 + 1) * w, axis=0)
    part = tl.load(part_ptr + (bh * SPLITS + rs)[:, None] * D + rd[None, :])
    tl.store(o_ptr + bh * D + rd, (tl.sum(part * w[:, None], axis=0) / l_i).to(tl.float16))


class DecodeAttention(KernelPlan):
    """O[i] = softmax(q[i] K[i]^T / sqrt(d)) V[i] for bh independent queries."""

    bh: int = param(1056, help="batch x heads: one query each (1056: 2 waves of 4 programs an SM)", ge=1, le=1 << 16)
    t: int = param(4096, help="keys (and values) per query, a multiple of 256 (64 per split)", ge=256, le=1 << 20)
    d: Literal[128] = param(128, help="head width")
    dtype: Literal["float16"] = param("float16", help="element type of q, K, V and O")

    check_params: ClassVar[dict[str, Any]] = {"bh": 3, "t": 512}
    TILE: ClassVar[Config] = {"BLOCK_T": 32, "num_warps": 8}  # no tl.dot: the loads stay in registers
    SPLITS: ClassVar[int] = 1
    KERNELS: ClassVar[list[str]] = []

    @model_validator(mode="after")
    def _whole_blocks(self) -> DecodeAttention:
        if self.t % 256:
            raise ValueError(f"t={self.t}: the kernels take whole 64-key blocks in each of 4 chunks (no masks)")
        return self

    @property
    def qk_scale(self) -> float:
        return math.log2(math.e) / math.sqrt(self.d)

    def stages(self) -> list[Stage]:
        bh, t, d = float(self.bh), float(self.t), float(self.d)
        return [
            Stage(
                "decode",
                flops=4.0 * bh * t * d,  # q.K and P.V
                dram_bytes=2.0 * (2 * bh * t * d + 2 * bh * d),  # K, V read once; q read and O written
                precision="fp16",
                build=self.build,
                tuning=[self.TILE],
                kernels=self.KERNELS,
            )
        ]

    def decode(self, ws: Any, cfg: Config) -> tuple[Any, tuple[int, ...]]:
        """decode_kernel's launch over SPLITS chunks of each query's keys, and its grid."""
        grid = (self.bh, self.SPLITS)
        kernel = decode_kernel[grid]
        parts = (ws.get("partials"), ws.get("stats"))
        args = (ws["q"], ws["k"], ws["v"], ws["o"], *parts, self.t, self.t // self.SPLITS, self.qk_scale)
        return (lambda: kernel(*args, D=self.d, SPLITS=self.SPLITS, **cfg)), grid

    def build(self, ws: Any, cfg: Config) -> Launch:
        raise NotImplementedError

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        ws = {
            "q": torch.randn(self.bh, self.d, device=device, generator=g).half(),
            "k": torch.randn(self.bh, self.t, self.d, device=device, generator=g).half(),
            "v": torch.randn(self.bh, self.t, self.d, device=device, generator=g).half(),
            "o": torch.empty(self.bh, self.d, device=device, dtype=torch.float16),
        }
        if self.SPLITS > 1:
            ws["partials"] = torch.empty(self.bh, self.SPLITS, self.d, device=device)
            ws["stats"] = torch.empty(self.bh, self.SPLITS, 2, device=device)
        return ws

    def output(self, ws: Any) -> Any:
        return ws["o"]

    def reference(self, ws: Any) -> Any:
        import torch

        q, k, v = (ws[x].double() for x in ("q", "k", "v"))
        p = torch.softmax(torch.einsum("bd,btd->bt", q, k) / math.sqrt(self.d), dim=-1)
        return torch.einsum("bt,btd->bd", p, v)
