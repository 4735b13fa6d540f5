"""out = A @ B + rowsum(Z): two independent branches (a matmul, a row reduction), then a combine."""

BASELINE = "serial"
