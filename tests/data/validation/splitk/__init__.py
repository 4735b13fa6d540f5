"""Row sums of an fp32 matrix in two kernels (split partial sums, then a combine): the combine run by one program
looping over every row, and its twin with one program per 16 rows. The stage's time sits in its second kernel."""
