"""y = 2x + 1 launched once per row from a Python loop, and as one launch."""
