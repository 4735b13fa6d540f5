"""Attention O = softmax(Q K^T / sqrt(d)) V (fp16, non-causal) as two kernels exchanging the whole score matrix through
DRAM (`before`), and its fused twin, flash attention with the scores kept on chip (`after`). Triton 3.9 for sm_90 (CPU
compile, tests/data/validation/README.md): every kernel wgmma m64n64k16 with cp.async loads, warpsPerCTA [8, 1] (128
rows: no warpgroup repeats a product), no spills; flash_kernel 109 registers and softmax_pv_kernel 105 (2 CTAs an SM: 16
x 66 = 1056 programs, 4 whole waves), scores_kernel 64."""

BASELINE = "before"
