"""Decode attention (one query per batch x head, fp16) with split-KV where one pass already fills the GPU: four key
chunks per query, partial results through DRAM and a combine kernel (`before`), and its twin with one program per query
over all its keys (`after`). Triton 3.9 for sm_90 (CPU compile, tests/data/validation/README.md): decode_kernel 16-byte
loads, no barrier in its loop (bar.sync only in the merge after it), 63-64 registers on 8 warps, no spills: 4 CTAs an
SM, 1056 queries are 2 whole waves."""

BASELINE = "before"
