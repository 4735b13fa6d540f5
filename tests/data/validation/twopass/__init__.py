"""RMS normalization of the rows of an fp32 matrix, one program per row: the row read twice in chunks (once for the
sum of squares, once to scale it), and its twin holding the whole row on chip (read once)."""
