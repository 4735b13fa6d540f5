"""A compute-bound triangular workload (row r runs an FMA chain (r + 1) units long) as one program per row in natural
order, whose SMs end unevenly loaded, and its twin: a persistent grid of one program per SM, each taking rows i and
n - 1 - i so that every program does the same work."""
