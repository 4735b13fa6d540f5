"""The program behind src/kbench/sass_warmup.ncu-rep (ncu mode's SASS disassembler warm-up): one launch of a tiny
Triton kernel. Captured on the H100 machine with `ncu --clock-control none --section SourceCounters
--import-source no -k regex:kbench_sass_warmup -c 1 -o sass_warmup python3 sass_warmup_kernel.py`."""

import torch
import triton
import triton.language as tl


@triton.jit
def kbench_sass_warmup(x_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


x = torch.zeros(1024, device="cuda")
kbench_sass_warmup[(1,)](x, 1024, BLOCK=1024)
torch.cuda.synchronize()
print("ok", float(x.sum()))
