"""fp16 matmul tiles: `base` (tl.dot, 128x128 on 8 warps) is the fixed twin of `cudacore` (products summed on the
CUDA cores: tensor cores idle) and of `spilling` (a 256x256 accumulator on 4 warps: register spills)."""
