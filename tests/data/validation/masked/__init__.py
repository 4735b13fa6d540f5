"""A compute-bound row map whose rows are 1000 elements wide, one program per row: a 4096-lane block (three lanes in
four masked off, and computing all the same) and its twin with a 1024-lane block."""
