"""A user kernel package whose kernel raises: tests that a crash fails cleanly."""
