"""Benchmark matmul v2 in event mode: `python -m tests.benchmark.bench_matmul_v2`."""

from tests.benchmark._bench import main

if __name__ == "__main__":
    main("matmul", "v2")
