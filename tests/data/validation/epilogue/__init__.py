"""C = gelu(A @ B + bias) (fp16) as a GEMM writing A @ B to DRAM and an elementwise kernel applying the epilogue
(`before`), and its twin with the epilogue fused into the GEMM's store (`after`)."""

BASELINE = "before"
