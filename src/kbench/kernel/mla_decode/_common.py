"""What every MLA decode version shares: parameters, workspace, cost model, reference and the constraints.

Per batch element: queries q_nope [s, h, d] and q_pe [s, h, p], one latent cache kv [t, d + p] whose first d
columns are also the values. scores = (q_nope . kv[:, :d] + q_pe . kv[:, d:]) * scale, softmax over the cached
tokens, out = P . kv[:, :d]. The s new tokens are the last s positions: token i sees cache rows j <= t - s + i
(causal). scale = (d + p) ** -0.5.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from kbench.plan.base import Config, KernelPlan, Launch, Precision, Stage, param


@dataclass
class Workspace:
    q_nope: Any  # [b, s, h, d]
    q_pe: Any  # [b, s, h, p]
    kv: Any  # [b, t, d + p]
    out: Any  # [b, s, h, d]


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class MlaDecode(KernelPlan):
    """Absorbed MLA decode attention over a shared latent KV cache."""

    b: int = param(32, help="batch: sequences decoded at once", ge=1, le=4096)
    s: int = param(16, help="query tokens per sequence (1: plain decode; >1: speculative/MTP tokens)", ge=1, le=256)
    t: int = param(4096, help="cached tokens per sequence", ge=1, le=1 << 20)
    h: int = param(16, help="attention heads (128 in the full model)", ge=1, le=256)
    d: int = param(512, help="latent (value) width: kv_lora_rank", ge=16, le=1024)
    p: int = param(64, help="rotary (positional) width", ge=16, le=256)
    dtype: Literal["bfloat16", "float16", "float32"] = param("bfloat16", help="element type of q, kv and out")

    check_params: ClassVar[dict[str, Any]] = {"b": 2, "s": 3, "t": 70, "h": 4, "d": 64, "p": 16}
    tolerance: ClassVar[dict[str, float]] = {"float32": 2e-3, "float16": 4e-3, "bfloat16": 2e-2}  # fp32: tf32 dots
    # what a version's kernels need of the shapes (Triton's tl.arange wants powers of two)
    POW2_WIDTHS: ClassVar[bool] = False
    # what float32 inputs run at: Triton's tl.dot takes fp32 through the tensor cores as tf32
    FP32_AS: ClassVar[Precision] = "fp32"

    @model_validator(mode="after")
    def _runnable(self) -> MlaDecode:
        if self.s > self.t:
            raise ValueError(f"s={self.s} > t={self.t}: the s new tokens are among the t cached ones")
        if self.POW2_WIDTHS and not (_pow2(self.d) and _pow2(self.p)):
            raise ValueError(f"d={self.d}, p={self.p}: this version's kernels need both to be powers of two")
        return self

    @property
    def precision(self) -> Precision:
        return {"bfloat16": "bf16", "float16": "fp16", "float32": self.FP32_AS}[self.dtype]  # type: ignore[return-value]

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.d + self.p)

    def qk_flops(self) -> float:
        return 2.0 * self.b * self.s * self.h * self.t * (self.d + self.p)

    def pv_flops(self) -> float:
        return 2.0 * self.b * self.s * self.h * self.t * self.d

    def q_bytes(self) -> float:
        return float(self.element_bytes() * self.b * self.s * self.h * (self.d + self.p))

    def kv_bytes(self, cols: int | None = None) -> float:
        return float(self.element_bytes() * self.b * self.t * (cols if cols is not None else self.d + self.p))

    def out_bytes(self) -> float:
        return float(self.element_bytes() * self.b * self.s * self.h * self.d)

    @property
    def rows(self) -> int:
        """Query rows per sequence: its s tokens x h heads (token-major)."""
        return self.s * self.h

    def attention_stage(
        self, build: Callable[[Any, Config], Launch], tuning: list[Config], kernels: list[str]
    ) -> Stage:
        """The whole attention as one stage: every FLOP, and only the compulsory bytes (q, the cache once, out)."""
        return Stage(
            "attention",
            flops=self.qk_flops() + self.pv_flops(),
            dram_bytes=self.q_bytes() + self.kv_bytes() + self.out_bytes(),
            precision=self.precision,
            build=build,
            tuning=tuning,
            kernels=kernels,
        )

    def kernel_args(self, cfg: Config, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        """The Triton kernels' shape arguments and the config's tiles (BLOCK_D no wider than d; ``drop``: keys that
        are not kernel arguments)."""
        tiles = {k: v for k, v in cfg.items() if k not in ("BLOCK_D", *drop)}
        shape = {"scale": self.scale, "s": self.s, "t": self.t, "R": self.rows, "H": self.h, "D": self.d, "P": self.p}
        if "BLOCK_D" in cfg:
            shape["BLOCK_D"] = min(cfg["BLOCK_D"], self.d)
        return {**shape, **tiles}

    def row_tiles(self, tiles: list[Config]) -> list[Config]:
        """The tiles whose BLOCK_M wastes less than half a block of rows: s*h = 16 (plain decode at 16 heads) takes
        only 16-row blocks; larger tiles come in as the rows grow."""
        fit = max(16, 1 << (self.rows - 1).bit_length())
        return [c for c in tiles if c["BLOCK_M"] <= fit] or tiles[:1]

    def setup(self, device: str, seed: int) -> Workspace:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        dt = self.torch_dtype()
        b, s, t, h, d, p = self.b, self.s, self.t, self.h, self.d, self.p
        return Workspace(
            q_nope=torch.randn(b, s, h, d, device=device, generator=g).to(dt),
            q_pe=torch.randn(b, s, h, p, device=device, generator=g).to(dt),
            kv=torch.randn(b, t, d + p, device=device, generator=g).to(dt),
            out=torch.empty(b, s, h, d, device=device, dtype=dt),
        )

    def output(self, ws: Workspace) -> Any:
        return ws.out

    def reference(self, ws: Workspace) -> Any:
        import torch

        q = torch.cat([ws.q_nope, ws.q_pe], dim=-1).double()  # [b, s, h, d+p]
        kv = ws.kv.double()
        scores = torch.einsum("bshc,btc->bsht", q, kv) * self.scale
        pos = torch.arange(self.t, device=kv.device)
        limit = self.t - self.s + torch.arange(self.s, device=kv.device)  # token i sees rows <= t - s + i
        scores = scores.masked_fill((pos[None, :] > limit[:, None])[None, :, None, :], float("-inf"))
        probs = scores.softmax(dim=-1)
        return torch.einsum("bsht,btd->bshd", probs, kv[..., : self.d]).to(self.torch_dtype())
