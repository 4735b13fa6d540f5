"""MLA decode: every version at the issue's points in event mode, with each row's share of the device's measured
ceilings (conf/devices.json `measured`: copy bandwidth, bf16 matmul rate): `python -m tests.benchmark.bench_mla_decode`
on a CUDA machine (KBENCH_LOCK_CLOCKS=0 on a shared one). Targets: the memory-bound point (b=32 s=1 t=8192) at >= 75%
of the measured copy bandwidth, the compute-bound point (b=32 s=16 t=4096) at >= 40% of the measured bf16 rate."""

from __future__ import annotations

import argparse

from kbench.analysis.devices import load_devices
from kbench.capture.gpu import active_device
from kbench.plan.discovery import find_package
from tests.benchmark._bench import print_table, run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bench-runs", type=int, default=50)
    ap.add_argument("--out", default="out/profiles")
    args = ap.parse_args()
    rows = run("mla_decode", find_package("mla_decode").versions(), args.bench_runs, args.out)
    print_table("mla_decode", rows)
    spec = active_device(load_devices()).spec
    measured = spec.measured if spec else {}
    copy = measured.get("dram_gbps")
    mm = measured.get("peak_tflops_bf16")
    print(
        "\nshare of the measured ceilings at the useful work (every version credited with the baseline's model: the"
        " attention's FLOPs and its compulsory bytes, q + the cache once + out):"
    )
    print(f"{'version':<10}{'parameters':<40}{'GB/s':>8}{'of copy':>9}{'TFLOP/s':>9}{'of bf16 mm':>11}")
    for r in rows:
        gb = f"{100 * r.useful_gbps / copy.value:.1f}%" if copy else "n/a"
        tf = f"{100 * r.useful_tflops / mm.value:.1f}%" if mm else "n/a"
        print(f"{r.version:<10}{r.params:<40}{r.useful_gbps:>8.0f}{gb:>9}{r.useful_tflops:>9.1f}{tf:>11}")


if __name__ == "__main__":
    main()
