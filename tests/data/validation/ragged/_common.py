"""out[s] = sum of x over segment s; segment 0 holds half of x, the other SEGMENTS - 1 share the rest equally. What
both versions share. CHUNKED: programs take equal CHUNK-element pieces (a piece never spans two segments) and add
their sums to their segment's total; else one program per segment loops over the whole segment."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def segment_kernel(x_ptr, starts_ptr, out_ptr, BLOCK: tl.constexpr):
    seg = tl.program_id(0)
    start = tl.load(starts_ptr + seg)
    stop = tl.load(starts_ptr + seg + 1)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for base in range(start, stop, BLOCK):
        offs = base + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < stop, other=0.0)
    tl.store(out_ptr + seg, tl.sum(acc, axis=0))


@triton.jit
def chunk_kernel(x_ptr, chunk_seg_ptr, out_ptr, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, CHUNK, BLOCK):
        offs = c.to(tl.int64) * CHUNK + i + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs)
    tl.atomic_add(out_ptr + tl.load(chunk_seg_ptr + c), tl.sum(acc, axis=0))


class Ragged(KernelPlan):
    """out[s] = sum of segment s."""

    n: int = param(1 << 24, help="elements of x", ge=1)
    segments: int = param(1025, help="segments (the first holds half of x, the others equal parts)", ge=2)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 1 << 16, "segments": 9}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-4}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 4}]
    CHUNKED: ClassVar[bool] = False
    CHUNK: ClassVar[int] = 8192

    def stages(self) -> list[Stage]:
        n = float(self.n)
        return [
            Stage(
                "segsum",
                flops=n,
                dram_bytes=4 * n + 4 * self.segments,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["chunk_kernel" if self.CHUNKED else "segment_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        if self.CHUNKED:
            grid = (ws["chunk_seg"].numel(),)
            k = chunk_kernel[grid]

            def launch() -> None:
                ws["out"].zero_()
                k(ws["x"], ws["chunk_seg"], ws["out"], CHUNK=self.chunk, **cfg)

            return Launch(launch, grid)
        grid = (self.segments,)
        seg = segment_kernel[grid]
        return Launch(lambda: seg(ws["x"], ws["starts"], ws["out"], **cfg), grid)

    @property
    def chunk(self) -> int:
        return min(self.CHUNK, self.n // 2 // (self.segments - 1))

    def bounds(self) -> list[int]:
        half = self.n // 2
        rest = (self.n - half) // (self.segments - 1)
        return [0, half, *[half + rest * i for i in range(1, self.segments - 1)], self.n]

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.n, device=device, generator=g)
        b = self.bounds()
        # each segment's length is a multiple of the chunk (the shapes here are powers of two): chunk -> segment
        owner = [s for s in range(self.segments) for _ in range((b[s + 1] - b[s]) // self.chunk)]
        return {
            "x": x,
            "starts": torch.tensor(b, device=device, dtype=torch.int32),
            "chunk_seg": torch.tensor(owner, device=device, dtype=torch.int32),
            "out": torch.zeros(self.segments, device=device),
        }

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        import torch

        x, b = ws["x"].double(), self.bounds()
        return torch.stack([x[b[s] : b[s + 1]].sum() for s in range(self.segments)])
