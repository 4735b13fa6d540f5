"""Benchmark vector_add base in event mode: `python -m tests.benchmark.bench_vector_add`."""

from tests.benchmark._bench import main

if __name__ == "__main__":
    main("vector_add")
