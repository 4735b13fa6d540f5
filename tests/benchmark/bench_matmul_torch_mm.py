"""Benchmark matmul torch_mm in event mode: `python -m tests.benchmark.bench_matmul_torch_mm`."""

from tests.benchmark._bench import main

if __name__ == "__main__":
    main("matmul", "torch_mm")
