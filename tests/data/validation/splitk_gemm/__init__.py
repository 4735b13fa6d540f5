"""C = A @ B (fp16) with split-K where 128 x 128 output tiles already fill the GPU: each split's fp32 partial tile
through DRAM and a kernel summing them (`before`), and its twin where each tile runs its whole K loop (`after`)."""

BASELINE = "before"
