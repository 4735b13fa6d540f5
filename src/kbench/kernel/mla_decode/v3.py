"""mla_decode v3: Triton, split-KV: the cache of each sequence is cut into chunks attended in parallel (partial
outputs and log-sum-exps to HBM), then a combine kernel merges them. More programs than v2 when b x row blocks
would leave SMs idle (plain decode, s = 1); the split count is tuned, the first candidate chosen from the grid
against the SM count."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch, Precision, Stage

from ._common import MlaDecode, Workspace
from ._triton import attend


@dataclass
class SplitWorkspace(Workspace):
    partial: Any  # [b, max splits, s*h, d] fp32: each split's normalised output
    lse: Any  # [b, max splits, s*h] fp32: each split's base-2 log-sum-exp (-inf where it saw nothing)
    splits: Any  # [1] int32: how many splits the partial stage used (the combine reads it)


@triton.jit
def mla_v3_partial_kernel(q_nope_ptr, q_pe_ptr, kv_ptr, part_ptr, lse_ptr, n_ptr, scale, s, t, R, chunk, SPLITS_MAX,  # type: ignore[no-untyped-def]
                          H: tl.constexpr, D: tl.constexpr, P: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    split = tl.program_id(1)
    b = tl.program_id(2)  # the row blocks reading one chunk are launched together: the chunk is read once into L2
    if (tl.program_id(0) == 0) & (split == 0) & (b == 0):
        tl.store(n_ptr, tl.num_programs(1))
    start = split * chunk
    stop = tl.minimum(start + chunk, t)
    acc, m, total = attend(q_nope_ptr, q_pe_ptr, kv_ptr, b, rows, start, stop, scale, s, t, R, H, D, P, BLOCK_N)
    seen = total > 0
    out = acc / tl.where(seen, total, 1.0)[:, None]
    lse = tl.where(seen, m + tl.log2(tl.where(seen, total, 1.0)), float("-inf"))
    base = (b * SPLITS_MAX + split) * R
    dd = tl.arange(0, D)
    tl.store(part_ptr + (base + rows[:, None]) * D + dd[None, :], out, mask=rows[:, None] < R)
    tl.store(lse_ptr + base + rows, lse, mask=rows < R)


@triton.jit
def mla_v3_combine_kernel(part_ptr, lse_ptr, n_ptr, o_ptr, R, SPLITS_MAX, D: tl.constexpr,  # type: ignore[no-untyped-def]
                          BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dd = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)  # a column block each: b x rows/16 alone leaves SMs idle
    b = tl.program_id(2)
    rmask = rows < R
    SPLITS = tl.load(n_ptr)
    top = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    for i in range(0, SPLITS):
        top = tl.maximum(top, tl.load(lse_ptr + (b * SPLITS_MAX + i) * R + rows, mask=rmask, other=float("-inf")))
    top = tl.where(top == float("-inf"), 0.0, top)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    weight = tl.zeros((BLOCK_M,), tl.float32)
    for i in range(0, SPLITS):
        base = (b * SPLITS_MAX + i) * R
        w = tl.exp2(tl.load(lse_ptr + base + rows, mask=rmask, other=float("-inf")) - top)
        part = tl.load(part_ptr + (base + rows[:, None]) * D + dd[None, :], mask=rmask[:, None], other=0.0)
        acc += w[:, None] * part
        weight += w
    out = acc / tl.where(weight > 0, weight, 1.0)[:, None]
    tl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty), mask=rmask[:, None])


def sm_count() -> int:
    """The active GPU's SM count (132 on an H100 SXM when no GPU is visible: only a starting point for tuning)."""
    import torch

    return int(torch.cuda.get_device_properties(0).multi_processor_count) if torch.cuda.is_available() else 132


class MlaDecodeSplitKV(MlaDecode):
    """Split-KV flash-decoding: partial attention over cache chunks in parallel, then a combine kernel."""

    check_params: ClassVar[dict[str, Any]] = {**MlaDecode.check_params, "t": 260}  # 1, 2 and 4 splits checked

    POW2_WIDTHS: ClassVar[bool] = True
    FP32_AS: ClassVar[Precision] = "tf32"
    COMBINE_M: ClassVar[int] = 16
    SPLITS: ClassVar[tuple[int, ...]] = (1, 2, 4, 8, 16, 32, 64)
    # measured on an H100 (do_bench): 3 stages of 16x64 fastest at b=4 t=16384 (52.7 us at 16 splits), 2 stages at
    # b=32 t=8192 (126.5 us at 8 splits); 64x64 on 8 warps is v2's fastest tile at s=16
    TILES: ClassVar[list[Config]] = [
        {"BLOCK_M": 16, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
        {"BLOCK_M": 16, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
        {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2},
    ]

    def tuning(self) -> list[Config]:
        """Per row tile, the split count that fills the SMs about twice (each split at least one 64-row tile of the
        cache) and its neighbours, half and double: that first candidate first."""
        out: list[Config] = []
        for tile in self.row_tiles(self.TILES):
            programs = self.b * math.ceil(self.rows / tile["BLOCK_M"])
            useful = [n for n in self.SPLITS if n == 1 or self.t // n >= 64]
            want = max(1, math.ceil(2 * sm_count() / programs))
            first = min(useful, key=lambda n: (abs(math.log2(n) - math.log2(want)), n))
            near = [n for n in useful if n != first and first // 2 <= n <= 2 * first]
            out += [{**tile, "SPLITS": n} for n in [first, *near]]
        return out

    def setup(self, device: str, seed: int) -> SplitWorkspace:
        import torch

        ws = super().setup(device, seed)
        most, rows = max(c["SPLITS"] for c in self.tuning()), self.rows
        return SplitWorkspace(
            **vars(ws),
            partial=torch.empty(self.b, most, rows, self.d, device=device, dtype=torch.float32),
            lse=torch.empty(self.b, most, rows, device=device, dtype=torch.float32),
            splits=torch.zeros(1, device=device, dtype=torch.int32),
        )

    def stages(self) -> list[Stage]:
        tuning = self.tuning()
        rows = float(self.b * self.s * self.h)
        first = tuning[0]["SPLITS"]  # the model's partial traffic at the first candidate's split count
        partial_bytes = 4.0 * rows * first * (self.d + 1)
        return [
            Stage("partial", flops=self.qk_flops() + self.pv_flops(),
                  dram_bytes=self.q_bytes() + self.kv_bytes() + partial_bytes, precision=self.precision,
                  build=self._partial, tuning=tuning, kernels=["mla_v3_partial_kernel"]),
            Stage("combine", flops=3.0 * rows * first * self.d, dram_bytes=partial_bytes + self.out_bytes(),
                  precision="fp32", build=self._combine, tuning=[{"BLOCK_D": 64, "num_warps": 4}],
                  kernels=["mla_v3_combine_kernel"]),
        ]  # fmt: skip

    def _splits(self, ws: SplitWorkspace) -> int:
        return int(ws.lse.shape[1])

    def _partial(self, ws: SplitWorkspace, cfg: Config) -> Launch:
        splits = cfg["SPLITS"]
        chunk = triton.cdiv(triton.cdiv(self.t, splits), cfg["BLOCK_N"]) * cfg["BLOCK_N"]
        grid = (triton.cdiv(self.rows, cfg["BLOCK_M"]), splits, self.b)
        kernel, args = mla_v3_partial_kernel[grid], self.kernel_args(cfg, drop=("SPLITS",))
        most = self._splits(ws)
        return Launch(
            lambda: kernel(
                ws.q_nope, ws.q_pe, ws.kv, ws.partial, ws.lse, ws.splits, chunk=chunk, SPLITS_MAX=most, **args
            ),
            grid,
        )

    def _combine(self, ws: SplitWorkspace, cfg: Config) -> Launch:
        R = self.rows
        block_d = min(cfg["BLOCK_D"], self.d)
        grid = (triton.cdiv(R, self.COMBINE_M), self.d // block_d, self.b)
        kernel = mla_v3_combine_kernel[grid]
        return Launch(
            lambda: kernel(
                ws.partial,
                ws.lse,
                ws.splits,
                ws.out,
                R,
                self._splits(ws),
                D=self.d,
                BLOCK_M=self.COMBINE_M,
                BLOCK_D=block_d,
                num_warps=cfg["num_warps"],
            ),
            grid,
        )


PLAN = MlaDecodeSplitKV
