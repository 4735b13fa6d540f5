"""Shared driver: profile plan versions at a few parameter points through the event-mode API; print a table."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from kbench.api import event_profile_plan
from kbench.errors import KbenchError, UsageError
from kbench.plan.discovery import find_package, load_version

# A few meaningful points per plan: cache-resident, mid-size, and large enough to be DRAM/compute bound.
POINTS: dict[str, list[dict[str, Any]]] = {
    "vector_add": [{"n": 1 << 20}, {"n": 1 << 24}, {"n": 1 << 28}],
    "matmul": [{"m": 1024, "n": 1024, "k": 1024}, {"m": 4096, "n": 4096, "k": 4096}, {"m": 8192, "n": 8192, "k": 8192}],
    # the memory-bound and compute-bound points, plain decode at the full model's 128 heads, and a small batch
    "mla_decode": [
        {"b": 32, "s": 1, "t": 8192},
        {"b": 32, "s": 16, "t": 4096},
        {"b": 32, "s": 4, "t": 4096},
        {"b": 32, "s": 1, "t": 4096, "h": 128},
        {"b": 4, "s": 1, "t": 16384},
    ],
}


@dataclass
class Row:
    version: str
    params: str
    us: float
    tflops: float
    gbps: float
    efficiency: float | None
    speedup: float | None = None
    # the baseline's model at the same point over this version's time: the useful work's rates, the same FLOPs and
    # compulsory bytes for every version (a version's own model counts its intermediates' traffic too)
    useful_tflops: float = 0.0
    useful_gbps: float = 0.0


def run(
    package: str, versions: list[str], bench_runs: int, out_dir: str, points: list[dict[str, Any]] | None = None
) -> list[Row]:
    """Each point (the package's POINTS by default) at the baseline and each version; a version that refuses a
    point's parameters is left out of it, and says so on stderr."""
    baseline = find_package(package).baseline()
    rows: list[Row] = []
    for point in POINTS[package] if points is None else points:
        timed: dict[str, Row] = {}
        modelled: dict[str, tuple[float, float]] = {}  # each version's model: FLOPs and DRAM bytes
        for version in dict.fromkeys([baseline, *versions]):  # the baseline first, once
            try:
                plan = load_version(package, version).from_values(point)
            except UsageError as e:
                print(f"{version} left out at {point}: {e}", file=sys.stderr)
                continue
            r = event_profile_plan(plan, out_dir=out_dir, bench_runs=bench_runs)
            flops = sum(s.flops or 0.0 for s in r.stages)  # event mode always has the analytic model
            nbytes = sum(s.dram_bytes or 0.0 for s in r.stages)
            us = r.figures.total_us
            effs = [s.efficiency_pct for s in r.stages]
            eff = None if any(e is None for e in effs) else min(e for e in effs if e is not None)
            timed[version] = Row(version, plan.slug(), us, flops / us / 1e6, nbytes / us / 1e3, eff)
            modelled[version] = (flops, nbytes)
        useful_flops, useful_bytes = modelled[baseline]
        for version, row in timed.items():
            if version in versions or version == baseline:
                row.speedup = timed[baseline].us / row.us
                row.useful_tflops = useful_flops / row.us / 1e6
                row.useful_gbps = useful_bytes / row.us / 1e3
                rows.append(row)
    return rows


def print_table(package: str, rows: list[Row]) -> None:
    print(f"\n{package} (event mode; speedup vs the baseline version at the same parameters)")
    print(
        f"{'version':<10}{'parameters':<28}{'duration (us)':>15}{'TFLOP/s':>10}{'GB/s':>10}{'roofline eff.':>15}"
        f"{'speedup':>9}"
    )
    for r in rows:
        eff = "n/a" if r.efficiency is None else f"{r.efficiency:.1f}%"
        sp = "n/a" if r.speedup is None else f"{r.speedup:.2f}x"
        print(f"{r.version:<10}{r.params:<28}{r.us:>15.2f}{r.tflops:>10.2f}{r.gbps:>10.1f}{eff:>15}{sp:>9}")


def main(package: str | None = None, version: str | None = None) -> None:
    """One package at one version (default base), or every version of every plan when package is None."""
    ap = argparse.ArgumentParser(description="Benchmark kernel plan versions in event mode; prints a table.")
    ap.add_argument("--bench-runs", type=int, default=50, help="timed repetitions per stage")
    ap.add_argument("--out", default="out/profiles", help="root folder of the profiles written")
    args = ap.parse_args()
    try:
        for pkg in [package] if package else list(POINTS):
            versions = [version or "base"] if package else find_package(pkg).versions()
            for v in versions:
                load_version(pkg, v)  # an unknown version fails before any GPU work
            print_table(pkg, run(pkg, versions, args.bench_runs, args.out))
    except KbenchError as e:
        print(f"kbench: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
