"""Benchmark vector_add v2 in event mode: `python -m tests.benchmark.bench_vector_add_v2`."""

from tests.benchmark._bench import main

if __name__ == "__main__":
    main("vector_add", "v2")
