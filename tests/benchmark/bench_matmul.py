"""Benchmark matmul base in event mode: `python -m tests.benchmark.bench_matmul`."""

from tests.benchmark._bench import main

if __name__ == "__main__":
    main("matmul")
