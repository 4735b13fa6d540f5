"""C = A @ B in bf16/fp16 with fp32 accumulation; compute-bound at 4096^3, one stage."""

BASELINE = "torch_mm"
