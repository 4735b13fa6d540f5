"""y = exp(x) / 2 + 1 on an fp32 vector with the arithmetic in float64 (the H100's fp64 units, and a libdevice exp
instead of ex2.approx), and its twin computing in float32."""
