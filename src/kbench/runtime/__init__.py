"""Running plans: preparing and checking them, timing, output folders, one module per profiling mode."""
