"""oob base: shipped vector_add base with one planted bug: the load of b masks 64 lanes too late (reads past b)."""

from __future__ import annotations

import triton
import triton.language as tl

from kbench.kernel.vector_add.base import VectorAdd, Workspace
from kbench.plan.base import Config, Launch


@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=offs < n + 64)  # the planted bug
    # add in fp32 whatever the storage type: the stage's precision is fp32 CUDA-core work
    tl.store(c_ptr + offs, (a.to(tl.float32) + b.to(tl.float32)).to(c_ptr.dtype.element_ty), mask=mask)


class VectorAddOob(VectorAdd):
    """c = a + b over n elements, b read 64 elements past its end."""

    def _build_add(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        kernel = add_kernel[grid]
        return Launch(lambda: kernel(ws.a, ws.b, ws.c, self.n, **cfg), grid)


PLAN = VectorAddOob
