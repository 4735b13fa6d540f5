"""out[b, :] = sum over j < L of table[idx[b, j], :], fp32 rows of D = 256 columns (1 KiB, contiguous); what both
versions share. One program per bag. ROWS = 1: one row a step, its index loaded first (a scalar); else a [ROWS, D]
tile a step, its ROWS indices loaded as a vector."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

D = 256


@triton.jit
def bag_rows_kernel(table_ptr, idx_ptr, out_ptr, L, D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, D)
    acc = tl.zeros([D], dtype=tl.float32)
    for j in range(L):
        row = tl.load(idx_ptr + b * L + j).to(tl.int64)
        acc += tl.load(table_ptr + row * D + cols)  # its address waits on the index load above
    tl.store(out_ptr + b * D + cols, acc)


@triton.jit
def bag_tiles_kernel(table_ptr, idx_ptr, out_ptr, L, D: tl.constexpr, ROWS: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, D)
    acc = tl.zeros([ROWS, D], dtype=tl.float32)
    whole = L - L % ROWS
    for j in range(0, whole, ROWS):  # whole steps unmasked: no predicated loads, no zero-filled registers
        rows = tl.load(idx_ptr + b * L + j + tl.arange(0, ROWS)).to(tl.int64)
        acc += tl.load(table_ptr + rows[:, None] * D + cols[None, :])
    js = whole + tl.arange(0, ROWS)  # the bag's last L % ROWS rows, if any
    rows = tl.load(idx_ptr + b * L + js, mask=js < L, other=0).to(tl.int64)
    acc += tl.load(table_ptr + rows[:, None] * D + cols[None, :], mask=(js < L)[:, None], other=0.0)
    tl.store(out_ptr + b * D + cols, tl.sum(acc, axis=0))


class EmbeddingBag(KernelPlan):
    """out[b, :] = sum_j table[idx[b, j], :]."""

    bags: int = param(256, help="bags (one program each)", ge=1)
    bag: int = param(4096, help="rows gathered per bag", ge=1)
    rows: int = param(1 << 20, help="table rows of 256 fp32 (1 KiB each; 2^20 = 1 GiB)", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"bags": 6, "bag": 37, "rows": 1000}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-5}
    TUNING: ClassVar[list[Config]] = []
    ROWS: ClassVar[int] = 1

    def stages(self) -> list[Stage]:
        gathered = float(self.bags * self.bag)
        return [
            Stage(
                "bagsum",
                flops=D * gathered,
                dram_bytes=4.0 * (D * gathered + gathered + D * self.bags),  # the rows gathered, idx, out
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["bag_tiles_kernel" if self.ROWS > 1 else "bag_rows_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.bags,)
        args = (ws["table"], ws["idx"], ws["out"], self.bag)
        if self.ROWS > 1:
            tiles = bag_tiles_kernel[grid]
            return Launch(lambda: tiles(*args, D=D, ROWS=self.ROWS, **cfg), grid)
        one = bag_rows_kernel[grid]
        return Launch(lambda: one(*args, D=D, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        table = torch.rand(self.rows, D, device=device, generator=g)
        idx = torch.randint(0, self.rows, (self.bags, self.bag), device=device, generator=g, dtype=torch.int32)
        return {"table": table, "idx": idx, "out": torch.empty(self.bags, D, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        import torch

        table, idx = ws["table"], ws["idx"].long()
        step = 64  # bags at a time: the gathered rows of all bags at once would be a copy of the table's size
        return torch.cat([table[idx[b : b + step]].double().sum(dim=1) for b in range(0, self.bags, step)])
