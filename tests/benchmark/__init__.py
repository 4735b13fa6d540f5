"""Curated experiment drivers (not tests): `python -m tests.benchmark.bench_<plan>[_<version>]`, `bench_all`."""
