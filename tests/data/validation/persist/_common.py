"""y[r, :] = p_r(x[r, :]), p_r the recurrence v = 0.999 v + x run (r + 1) x UNIT steps from v = x, fp32: row r costs
r + 1 units (a triangle); what both versions share. Each row is BLOCK elements on 16 warps, 4 independent chains a
thread, so one program keeps an SM's FP32 pipes busy alone. PERSISTENT: a grid of one program per SM, program p
taking the row pairs (i, n - 1 - i) for i = p, p + P, ...; else one program per row, row r = program r. Compiled
for sm_90 (Triton 3.9): the loop trip is 64 FFMAs and 3 loop instructions, 16-19 registers a thread."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl
from pydantic import model_validator

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

A = 0.999
INNER = 16  # chain steps unrolled per loop trip
SMS_WITHOUT_CUDA = 2  # the persistent grid under the CPU interpreter: a program takes several pairs


@triton.jit
def _chain_row(x_ptr, y_ptr, r, UNIT: tl.constexpr, BLOCK: tl.constexpr, INNER: tl.constexpr):
    offs = r * BLOCK + tl.arange(0, BLOCK)  # rows x BLOCK < 2^31 (rows <= 65536)
    x = tl.load(x_ptr + offs)
    v = x
    for _ in range((r + 1) * (UNIT // INNER)):
        for _ in tl.static_range(INNER):
            v = v * 0.999 + x
    tl.store(y_ptr + offs, v)


@triton.jit
def chain_rows_kernel(
    x_ptr, y_ptr, rows, UNIT: tl.constexpr, PERSISTENT: tl.constexpr, BLOCK: tl.constexpr, INNER: tl.constexpr
):
    pid = tl.program_id(0)
    if PERSISTENT:
        for i in range(pid, (rows + 1) // 2, tl.num_programs(0)):
            _chain_row(x_ptr, y_ptr, i, UNIT, BLOCK, INNER)
            if rows - 1 - i != i:  # the middle row of an odd count is its own pair
                _chain_row(x_ptr, y_ptr, rows - 1 - i, UNIT, BLOCK, INNER)
    else:
        _chain_row(x_ptr, y_ptr, pid, UNIT, BLOCK, INNER)


class ChainRows(KernelPlan):
    """y[r, :] = p_r(x[r, :]), row r (r + 1) x UNIT chain steps."""

    rows: int = param(264, help="rows (row r costs r + 1 units; 264 = 2 x the H100's 132 SMs)", ge=1, le=65536)
    unit: int = param(128, help="chain steps per unit of work (a multiple of 16)", ge=INNER)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 7, "unit": 16}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-4}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 2048, "num_warps": 16}]
    PERSISTENT: ClassVar[bool] = False

    @model_validator(mode="after")
    def _whole_trips(self) -> ChainRows:
        if self.unit % INNER:
            raise ValueError(f"unit={self.unit}: the chain runs {INNER} steps a loop trip, unit must be a multiple")
        return self

    def steps(self) -> float:
        """chain steps summed over the rows: the triangle."""
        return float(self.unit * self.rows * (self.rows + 1) // 2)

    def stages(self) -> list[Stage]:
        block = float(self.TUNING[0]["BLOCK"])
        return [
            Stage(
                "chains",
                flops=2.0 * block * self.steps(),  # one FMA per element per step
                dram_bytes=8.0 * block * self.rows,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["chain_rows_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        import torch

        x = ws["x"]
        if self.PERSISTENT:
            sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else SMS_WITHOUT_CUDA
            grid = (min(sms, (self.rows + 1) // 2),)
        else:
            grid = (self.rows,)
        k = chain_rows_kernel[grid]
        flags = {"UNIT": self.unit, "PERSISTENT": self.PERSISTENT, "INNER": INNER}
        return Launch(lambda: k(x, ws["y"], self.rows, **flags, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.rows, self.TUNING[0]["BLOCK"], device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        import torch

        x = ws["x"].double()
        t = torch.arange(1, self.rows + 1, device=x.device, dtype=torch.float64)[:, None] * self.unit
        at = torch.pow(torch.tensor(A, dtype=torch.float64, device=x.device), t)
        return at * x + x * (1 - at) / (1 - A)  # v_t = A^t v_0 + x (1 - A^t) / (1 - A), v_0 = x
