"""Row softmax as three passes over the matrix (max, sum of exp, normalize), and its fused twin."""
