"""An fp32 row sum, one CTA per row, looping over the row 32 floats at a time on one warp (one 4-byte load per
thread per iteration), and its twin looping 2048 at a time on 4 warps (16-byte loads)."""
