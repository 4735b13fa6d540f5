"""Benchmark every version of every shipped plan in event mode: `python -m tests.benchmark.bench_all`."""

from tests.benchmark._bench import main

if __name__ == "__main__":
    main()
