"""C = A @ B (fp16) with split-K where 128 x 128 output tiles already fill the GPU: each split's fp32 partial tile
through DRAM and a kernel summing them (`before`), and its twin where each tile runs its whole K loop (`after`). Triton
3.9 for sm_90 (CPU compile, tests/data/validation/README.md): mm_kernel wgmma m64n128k16, cp.async loads, 96 KB shared,
no spills, 98 registers storing fp32 partials and 124 storing fp16 (2 CTAs an SM either way: 1056 tiles are 4 whole
waves of 264, 4224 split programs 16)."""

BASELINE = "before"
