"""A compute-bound fp32 recurrence, y = p(x) with p a 256-step FMA chain per element, run by one CTA of 4 warps per SM
each thread walking one element at a time (one warp per scheduler, each FMA waiting on the one before), and its twin
with many CTAs of 8 warps holding 4 elements per thread."""
