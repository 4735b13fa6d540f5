"""vector_add with a planted out-of-bounds read, for the interpreter access trace (tests/test_access.py)."""
