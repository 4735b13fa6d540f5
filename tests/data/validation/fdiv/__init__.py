"""y_i = sum_k x_i / (c_k + x_i) over K centres: an IEEE division per term (div.rn.f32, a subroutine of FMAs around
MUFU.RCP and FCHK), and its twins with a fast division (div.full.f32) or an approximate reciprocal (rsqrt.approx)."""
