"""Plans whose results are wrong, for testing the correctness check."""
