"""y = 2x: a toy package whose version module names its symbols after the version (kbench clone's test input)."""
