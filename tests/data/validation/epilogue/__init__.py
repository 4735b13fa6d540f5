"""C = gelu(A @ B + bias) (fp16) as a GEMM writing A @ B to DRAM and an elementwise kernel applying the epilogue
(`before`), and its twin with the epilogue fused into the GEMM's store (`after`). Triton 3.9 for sm_90 (CPU compile,
tests/data/validation/README.md): gemm_kernel wgmma m64n128k16, cp.async loads, 96 KB shared, no spills, 98 registers
storing fp32 and 123 with the fused epilogue (2 CTAs an SM either way: 4224 tiles, 16 whole waves); gelu's division is
div.full.f32; epilogue_kernel moves 16-byte vectors."""

BASELINE = "before"
