"""Attention O = softmax(Q K^T / sqrt(d)) V (fp16, non-causal) as two kernels exchanging the whole score matrix
through DRAM (`before`), and its fused twin, flash attention with the scores kept on chip (`after`)."""

BASELINE = "before"
