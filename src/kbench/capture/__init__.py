"""Running plans on the GPU: preparing and checking them, CUDA-event timing, clocks and the per-GPU lock, the child
process a profiler runs, and tools.py, the only place that starts subprocesses."""
