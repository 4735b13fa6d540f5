"""Shipped kernel packages (one sub-package each) and `python -m kbench.kernel`."""
