"""What every MLA decode version shares: parameters, workspace, cost model, reference and the constraints.

Per batch element: queries q_nope [s, h, d] and q_pe [s, h, p], one latent cache kv [t, d + p] whose first d
columns are also the values. scores = (q_nope . kv[:, :d] + q_pe . kv[:, d:]) * scale, softmax over the cached
tokens, out = P . kv[:, :d]. The s new tokens are the last s positions: token i sees cache rows j <= t - s + i
(causal). scale = (d + p) ** -0.5.

What serving passes (``t_min``, ``page``; the versions with ``SERVES``): a ragged batch, sequence i holding lens[i]
cached tokens drawn from [t_min, t] with a fixed seed (its s new tokens its last s), and a paged cache, each
sequence's tokens in blocks of ``page`` rows of one shuffled pool [pages, page, d + p] found through a block table
[b, most pages] (vLLM's and FlashMLA's layout).
"""

from __future__ import annotations

import math
import random
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


@dataclass
class ServingWorkspace(Workspace):
    """A ragged or paged batch: kv is the page pool [pages, page, d + p] (paged) or [b, t, d + p] (rows past a
    sequence's length unused)."""

    lens: Any  # [b] int32: cached tokens per sequence
    table: Any  # [b, most pages] int32: each sequence's blocks in the pool, in order (None: contiguous)


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
    t_min: int = param(0, help="ragged batch: each sequence's cache length drawn from [t_min, t] with a fixed seed "
                       "(0: every sequence holds t)", ge=0, le=1 << 20)  # fmt: skip
    page: int = param(0, help="paged cache: tokens per block of one shuffled pool, found through a block table "
                      "(0: one contiguous cache per sequence)", ge=0, le=4096)  # fmt: skip
    dtype: Literal["bfloat16", "float16", "float32"] = param("bfloat16", help="element type of q, kv and out")

    check_params: ClassVar[dict[str, Any]] = {"b": 2, "s": 3, "t": 70, "h": 4, "d": 64, "p": 16}
    tolerance: ClassVar[dict[str, float]] = {"float32": 2e-3, "float16": 4e-3, "bfloat16": 2e-2}  # fp32: tf32 dots
    # what a version's kernels need of the shapes (Triton's tl.arange wants powers of two)
    POW2_WIDTHS: ClassVar[bool] = False
    # what float32 inputs run at: Triton's tl.dot takes fp32 through the tensor cores as tf32
    FP32_AS: ClassVar[Precision] = "fp32"
    # whether the version's kernels take what serving passes: ragged lengths (t_min) and a paged cache (page)
    SERVES: ClassVar[bool] = False
    PAGE_MULTIPLE: ClassVar[int] = 1  # the paged cache's block size must be a multiple of this (a kernel's tile)

    @model_validator(mode="after")
    def _runnable(self) -> MlaDecode:
        if self.s > self.t:
            raise ValueError(f"s={self.s} > t={self.t}: the s new tokens are among the t cached ones")
        if self.POW2_WIDTHS and not (_pow2(self.d) and _pow2(self.p)):
            raise ValueError(f"d={self.d}, p={self.p}: this version's kernels need both to be powers of two")
        if self.serving() and not self.SERVES:
            raise ValueError(
                f"t_min={self.t_min}, page={self.page}: this version's kernels take one contiguous cache of t rows "
                "per sequence; ragged (t_min) and paged (page) batches run on base and v9-v16"
            )
        if self.t_min and not self.s <= self.t_min <= self.t:
            raise ValueError(f"t_min={self.t_min}: a ragged batch's shortest cache lies in [s, t] = [{self.s}, "
                             f"{self.t}]")  # fmt: skip
        if self.page % self.PAGE_MULTIPLE:
            raise ValueError(f"page={self.page}: this version's paged cache takes blocks of a multiple of "
                             f"{self.PAGE_MULTIPLE} rows")  # fmt: skip
        return self

    def serving(self) -> bool:
        """Whether the batch is ragged or its cache paged."""
        return bool(self.t_min or self.page)

    def lens(self) -> list[int]:
        """Each sequence's cached tokens: t for all, or (ragged) drawn from [t_min, t] by a seeded generator, the same
        draws for every batch size (the first b of one sequence)."""
        if not self.t_min:
            return [self.t] * self.b
        draw = random.Random(f"mla_decode ragged {self.t_min} {self.t}")
        return [draw.randint(self.t_min, self.t) for _ in range(self.b)]

    def pages(self) -> list[int]:
        """Each sequence's blocks in the paged cache (none where it is contiguous)."""
        return [math.ceil(n / self.page) for n in self.lens()] if self.page else []

    def slug_values(self) -> dict[str, Any]:
        """The serving parameters only where they are set: earlier runs keep their names."""
        return {k: v for k, v in self.values().items() if k not in ("t_min", "page") or v}

    @property
    def precision(self) -> Precision:
        return {"bfloat16": "bf16", "float16": "fp16", "float32": self.FP32_AS}[self.dtype]  # type: ignore[return-value]

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.d + self.p)

    def tokens(self) -> int:
        """Cached tokens over the batch: b x t, or the ragged lengths' sum."""
        return sum(self.lens()) if self.t_min else self.b * self.t

    def qk_flops(self) -> float:
        return 2.0 * self.s * self.h * self.tokens() * (self.d + self.p)

    def pv_flops(self) -> float:
        return 2.0 * self.s * self.h * self.tokens() * self.d

    def q_bytes(self) -> float:
        return float(self.element_bytes() * self.b * self.s * self.h * (self.d + self.p))

    def kv_bytes(self, cols: int | None = None) -> float:
        return float(self.element_bytes() * self.tokens() * (cols if cols is not None else self.d + self.p))

    def index_bytes(self) -> float:
        """The lengths and the block table a serving batch reads (int32)."""
        return 4.0 * (self.b + sum(self.pages())) if self.serving() else 0.0

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
            dram_bytes=self.q_bytes() + self.kv_bytes() + self.out_bytes() + self.index_bytes(),
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
        cache = [sum(self.pages()), self.page] if self.page else [b, t]
        ws = Workspace(
            q_nope=torch.randn(b, s, h, d, device=device, generator=g).to(dt),
            q_pe=torch.randn(b, s, h, p, device=device, generator=g).to(dt),
            kv=torch.randn(*cache, d + p, device=device, generator=g).to(dt),
            out=torch.empty(b, s, h, d, device=device, dtype=dt),
        )
        return self.served(ws, device, seed) if self.serving() else ws

    def served(self, ws: Workspace, device: str, seed: int) -> ServingWorkspace:
        """``ws`` with the batch's lengths and (paged) its block table."""
        import torch

        lens = torch.tensor(self.lens(), device=device, dtype=torch.int32)
        return ServingWorkspace(**vars(ws), lens=lens, table=self.block_table(device, seed))

    def block_table(self, device: str, seed: int) -> Any:
        """[b, most pages] int32: the pool's blocks dealt to the sequences in a seeded shuffle (-1 past a sequence's
        last block), or None for a contiguous cache."""
        import torch

        pages = self.pages()
        if not pages:
            return None
        order = torch.randperm(sum(pages), generator=torch.Generator().manual_seed(seed)).tolist()
        table = torch.full((self.b, max(pages)), -1, dtype=torch.int32)
        start = 0
        for i, n in enumerate(pages):
            table[i, :n] = torch.tensor(order[start : start + n], dtype=torch.int32)
            start += n
        return table.to(device)

    def cache_of(self, ws: Workspace, i: int) -> Any:
        """Sequence i's cached rows [its length, d + p], wherever they lie."""
        n = self.lens()[i]
        if not self.page:
            return ws.kv[i, :n]
        blocks = ws.table[i, : math.ceil(n / self.page)].long()  # type: ignore[attr-defined]
        return ws.kv[blocks].reshape(-1, self.d + self.p)[:n]

    def output(self, ws: Workspace) -> Any:
        return ws.out

    def reference(self, ws: Workspace) -> Any:
        import torch

        if self.serving():  # one sequence at a time, each over its own rows
            q = torch.cat([ws.q_nope, ws.q_pe], dim=-1).double()
            out = []
            for i, n in enumerate(self.lens()):
                kv = self.cache_of(ws, i).double()
                scores = torch.einsum("shc,tc->sht", q[i], kv) * self.scale
                limit = n - self.s + torch.arange(self.s, device=kv.device)
                hidden = torch.arange(n, device=kv.device)[None, :] > limit[:, None]
                probs = scores.masked_fill(hidden[:, None, :], float("-inf")).softmax(dim=-1)
                out.append(torch.einsum("sht,td->shd", probs, kv[:, : self.d]))
            return torch.stack(out).to(self.torch_dtype())
        q = torch.cat([ws.q_nope, ws.q_pe], dim=-1).double()  # [b, s, h, d+p]
        kv = ws.kv.double()
        scores = torch.einsum("bshc,btc->bsht", q, kv) * self.scale
        pos = torch.arange(self.t, device=kv.device)
        limit = self.t - self.s + torch.arange(self.s, device=kv.device)  # token i sees rows <= t - s + i
        scores = scores.masked_fill((pos[None, :] > limit[:, None])[None, :, None, :], float("-inf"))
        probs = scores.softmax(dim=-1)
        return torch.einsum("bsht,btd->bshd", probs, kv[..., : self.d]).to(self.torch_dtype())
