"""What to run: KernelPlan and Stage, version discovery, the autotune cache."""
