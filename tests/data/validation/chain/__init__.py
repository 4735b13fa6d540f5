"""A product that feeds a second one, split between two warpgroups: mla_decode v2's fused attention at d=128 (scores
Q.K^T, online softmax, P.V), 64-row blocks on 8 warps, where each warpgroup computes the whole score tile because
P.V reads it from registers and the warpgroups split P.V's columns; its twin on 4 warps, one warpgroup holding the
whole 64 x 128 accumulator (a register budget that d=512 does not allow)."""

BASELINE = "split"
