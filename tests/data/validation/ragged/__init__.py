"""Segment sums of a ragged fp32 vector whose first segment holds half the data: one program per segment (the
first one runs alone long after the others), and its twin splitting the data into equal chunks."""
