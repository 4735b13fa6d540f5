"""vector_add gluon: base's kernel written in Gluon (triton.experimental.gluon), its register layout explicit: each
thread holds 4 consecutive elements (one 16-byte access in fp32), 32 threads a warp, 4 warps a program. The smallest
plan whose kernel Triton's CPU interpreter cannot run: `kbench check` on a CPU compiles it for sm_90 instead and
leaves its numerics to a GPU (kbench.capture.gluon)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from kbench.plan.base import Config, Launch, Stage

from .base import VectorAdd, Workspace

WARPS = 4  # the layout's warps per program: the launch's num_warps must match


@gluon.jit
def gluon_add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: gl.constexpr):  # type: ignore[no-untyped-def]
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    offs = gl.program_id(0).to(gl.int64) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    a = gl.load(a_ptr + offs, mask=mask)
    b = gl.load(b_ptr + offs, mask=mask)
    gl.store(c_ptr + offs, (a.to(gl.float32) + b.to(gl.float32)).to(c_ptr.dtype.element_ty), mask=mask)


class VectorAddGluon(VectorAdd):
    """c = a + b, the kernel in Gluon."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": WARPS}]

    def stages(self) -> list[Stage]:
        return [dataclasses.replace(stage, kernels=["gluon_add_kernel"]) for stage in super().stages()]

    def _build_add(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        kernel = gluon_add_kernel[grid]
        return Launch(lambda: kernel(ws.a, ws.b, ws.c, self.n, cfg["BLOCK"], num_warps=cfg["num_warps"]), grid)


PLAN = VectorAddGluon
