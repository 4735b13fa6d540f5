"""c = a + b elementwise; memory-bound, one stage."""

BASELINE = "base"
