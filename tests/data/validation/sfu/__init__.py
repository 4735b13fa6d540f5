"""y_i = sum_j exp(x_i - c_j) over K centres: one exp per term on the special-function unit, and its twin that
factors exp(x_i) out (exp(x_i - c_j) = exp(x_i) exp(-c_j), exp(-c_j) computed once per program)."""
