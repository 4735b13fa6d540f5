"""MLA decode: every version at the issue's points in event mode, with each row's share of ceilings measured in the
same run (a bf16 torch.mm of 8192^3 and a device-to-device copy, CUDA events, median): `python -m
tests.benchmark.bench_mla_decode` on a CUDA machine (KBENCH_LOCK_CLOCKS=0 on a shared one). Targets: the
compute-bound point (b=32 s=16 t=4096 h=16) at >= 60% of the measured bf16 matmul rate (issue 44; issue 29 asked
55%); the memory-bound point (b=32 s=1 t=8192) no slower than v3."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

from kbench.plan.discovery import find_package
from tests.benchmark._bench import Row, print_table, run

COMPUTE_POINT = "b32_s16_t4096_h16_d512_p64_bfloat16"
MEMORY_POINT = "b32_s1_t8192_h16_d512_p64_bfloat16"
TARGET_SHARE = 60.0  # issue 44 (issue 29 asked 55)


def _median_ms(fn: Callable[[], object], reps: int) -> float:
    """Median of ``reps`` CUDA-event timings of ``fn`` after 10 warm-up calls."""
    import torch

    for _ in range(10):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)))
    return statistics.median(times)


def _matmul_tflops(reps: int) -> float:
    import torch

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return 2.0 * n**3 / (_median_ms(lambda: torch.mm(a, b), reps) * 1e-3) / 1e12


def _copy_gbps(reps: int) -> float:
    import torch

    src = torch.empty(1 << 30, device="cuda", dtype=torch.float16)  # 2 GiB, read and written once each
    dst = torch.empty_like(src)
    return 2.0 * src.numel() * src.element_size() / (_median_ms(lambda: dst.copy_(src), reps) * 1e-3) / 1e9


def measured_ceilings(reps: int = 50) -> tuple[float, float]:
    """The bf16 matmul rate (TFLOP/s, torch.mm 8192^3) and the copy bandwidth (GB/s, read + write of 2 GiB),
    measured now on the active GPU."""
    return _matmul_tflops(reps), _copy_gbps(reps)


def share_table(rows: list[Row], mm: float, copy: float) -> list[str]:
    """Per version and point: time, the useful work's TFLOP/s and GB/s (the baseline's model: the attention's FLOPs
    and its compulsory bytes) and their shares of the ceilings measured in this run."""
    lines = [f"{'version':<8}{'point':<38}{'time (us)':>11}{'TFLOP/s':>9}{'GB/s':>8}{'of bf16 mm':>12}{'of copy':>9}"]
    for r in rows:
        lines.append(
            f"{r.version:<8}{r.params:<38}{r.us:>11.2f}{r.useful_tflops:>9.1f}{r.useful_gbps:>8.0f}"
            f"{100 * r.useful_tflops / mm:>11.1f}%{100 * r.useful_gbps / copy:>8.1f}%"
        )
    return lines


def verdict(rows: list[Row], mm: float) -> list[str]:
    """The targets against this run's rows: the fastest version at the compute-bound point, and the fastest of those
    no slower than v3 at the memory-bound point (1% allowed for noise)."""
    at = {(r.version, r.params): r for r in rows}
    v3 = at.get(("v3", MEMORY_POINT))
    compute = sorted((r for r in rows if r.params == COMPUTE_POINT), key=lambda r: -r.useful_tflops)

    def line(what: str, r: Row) -> str:
        share = 100 * r.useful_tflops / mm
        met = "met" if share >= TARGET_SHARE else "not met"
        mem = at.get((r.version, MEMORY_POINT))
        there = f"; memory-bound point {mem.us:.2f} us" if mem else ""
        return (
            f"{what}: {r.version} at {r.useful_tflops:.1f} TFLOP/s = {share:.1f}% of the bf16 matmul ceiling measured "
            f"in this run ({mm:.0f} TFLOP/s), target {TARGET_SHARE:.0f}% {met}"
            f"{there}"
        )

    out = [line("compute-bound point, fastest", compute[0])]
    if v3:
        kept = [r for r in compute if (m := at.get((r.version, MEMORY_POINT))) and m.us <= 1.01 * v3.us]
        if kept:
            out.append(line(f"fastest of those no slower than v3 at the memory-bound point ({v3.us:.2f} us)", kept[0]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bench-runs", type=int, default=50)
    ap.add_argument("--out", default="out/profiles")
    ap.add_argument("--versions", default=None, help="comma-separated versions to time (default: every version)")
    args = ap.parse_args()
    versions = args.versions.split(",") if args.versions else find_package("mla_decode").versions()
    mm, copy = measured_ceilings()
    print(f"ceilings measured in this run: bf16 torch.mm 8192^3 {mm:.1f} TFLOP/s, copy {copy:.0f} GB/s")
    rows = run("mla_decode", versions, args.bench_runs, args.out)
    print_table("mla_decode", rows)
    mm_after, copy_after = measured_ceilings()
    print(
        f"\nceilings again after the versions: bf16 mm {mm_after:.1f} TFLOP/s, copy {copy_after:.0f} GB/s; the shares "
        "below are against the first measurement"
    )
    print("\nshare of the ceilings measured in this run, at the useful work (every version credited with the "
          "baseline's model: the attention's FLOPs and its compulsory bytes, q + the cache once + out):")  # fmt: skip
    print("\n".join(share_table(rows, mm, copy)))
    print()
    print("\n".join(verdict(rows, mm)))


if __name__ == "__main__":
    main()
