"""xstages: a package the edit tests change on disk (copied to a temporary folder first)."""
