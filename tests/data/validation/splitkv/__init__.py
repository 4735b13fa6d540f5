"""Decode attention (one query per batch x head, fp16) with split-KV where one pass already fills the GPU: four key
chunks per query, partial results through DRAM and a combine kernel (`before`), and its twin with one program per
query over all its keys (`after`)."""

BASELINE = "before"
