"""kbench's version, in one place (the package face and the run record read it)."""

__version__ = "0.1.0"
