"""An fp32 row sum, one CTA per row looping over the row: the running sum kept as a scalar (a cross-warp reduction,
through shared memory and barriers, every iteration), and its twin keeping a vector reduced once after the loop."""
