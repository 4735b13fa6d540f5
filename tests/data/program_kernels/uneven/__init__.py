"""Programs of unequal length: row r of x sums its first r + 1 blocks (a causal, triangular workload), one program
per row (triangular), and its twin pairing row i with row n-1-i in one program, so every program sums n + 1 blocks
(paired). For the per-program work an access run predicts (kbench.analysis.access.program_work)."""
