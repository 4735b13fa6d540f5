"""fp16 matmul tiles: `base` (tl.dot, 128x128 on 8 warps, 3 stages) is the fixed twin of `cudacore` (products summed
on the CUDA cores: tensor cores idle), `fma`, `spilling` (a 256x256 accumulator on 4 warps: register spills),
`nostage` (one stage: no pipelined loads), `mmasync` (2 warps: mma.sync, not wgmma), `narrow` (128x32 tiles: wgmma
n32) and `tf32` (the fp16 tiles upcast to fp32: tf32 tensor cores)."""
