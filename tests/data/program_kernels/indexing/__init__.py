"""y = x * scale[c] + shift[h] + bias[w] over an NCHW tensor: flat, one element per thread with its (c, h, w) taken from
the flat index by 64-bit division and modulo by runtime sizes (many integer instructions per 8 bytes moved: meant to be
issue-bound), and its twin, rows, one W-row per program with c and h computed once per program. For the issue roof."""
