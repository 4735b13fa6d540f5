"""A row sum over the first half of each row: reading whole rows (the second half masked to zero after the load,
2x the bytes the result needs) and its twin reading the half it sums."""
