"""MLA decode: every version at the issue's points in event mode, with each row's share of ceilings measured in the
same run (a bf16 torch.mm of 8192^3 and a device-to-device copy, CUDA events, median): `python -m
tests.benchmark.bench_mla_decode` on a CUDA machine (KBENCH_LOCK_CLOCKS=0 on a shared one). Targets: the
compute-bound point (b=32 s=16 t=4096 h=16) at >= 60% of the measured bf16 matmul rate (issue 44; issue 29 asked
55%); the memory-bound point (b=32 s=1 t=8192) no slower than v3. ``--points serving`` runs issue 52's rows
(DeepSeek's 128 heads, small and ragged batches, a paged cache, t from 1024 to 32768) against its goals, with the
peers (FlashInfer's and FlashMLA's MLA decode, tests/benchmark/mla_peers.py) timed in the same run where installed."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

from kbench.plan.discovery import find_package, load_version
from tests.benchmark import mla_peers
from tests.benchmark._bench import Row, print_table, run
from tests.benchmark.mla_peers import PEERS

# issue 52's rows: the compute-bound point, DeepSeek's 128 heads, small batches, the memory-bound sweep, MTP, serving
SERVING_POINTS: list[dict[str, int]] = [
    {"b": 32, "s": 16, "t": 4096, "h": 16},
    {"b": 32, "s": 1, "t": 4096, "h": 128},
    {"b": 64, "s": 1, "t": 4096, "h": 128},
    *({"b": b, "s": 16, "t": 4096, "h": 16} for b in (4, 8, 16)),
    *({"b": b, "s": 1, "t": 4096, "h": 128} for b in (4, 8, 16)),
    *({"b": 32, "s": 1, "t": t, "h": 16} for t in (1024, 4096, 8192, 16384, 32768)),
    {"b": 32, "s": 4, "t": 4096, "h": 16},
    {"b": 32, "s": 1, "t": 16384, "h": 128, "t_min": 512, "page": 64},
    {"b": 64, "s": 1, "t": 16384, "h": 128, "t_min": 512, "page": 64},
    {"b": 32, "s": 4, "t": 16384, "h": 16, "t_min": 512, "page": 64},
]
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


def peer_rows(points: list[dict[str, int]], reps: int, peers: tuple[str, ...]) -> list[Row]:
    """FlashInfer's and FlashMLA's MLA decode at each point, on the baseline's inputs in a paged cache of 64-row
    blocks (both take only paged caches), checked against the reference (tests/benchmark/mla_peers.py); a peer that
    does not run says why."""
    rows: list[Row] = []
    for point in points:
        base = load_version("mla_decode", "base")
        model = base.from_values(point)
        paged = base.from_values({**point, "page": point.get("page") or 64})
        ws = paged.setup("cuda", 0)
        times = mla_peers.peer_times(point, ws.q_nope, ws.q_pe, ws.kv, ws.table, ws.lens, paged.page, reps,  # type: ignore[attr-defined]
                                     paged.reference(ws), peers)  # fmt: skip
        flops, nbytes = sum(st.flops for st in model.stages()), sum(st.dram_bytes for st in model.stages())
        for name, us in times.items():
            if isinstance(us, str) or name.endswith(" rel_l2"):
                print(f"peers: {name} at {model.slug()}: {us}", flush=True)
                continue
            rows.append(Row(name, model.slug(), us, flops / us / 1e6, nbytes / us / 1e3, None, None,
                            flops / us / 1e6, nbytes / us / 1e3))  # fmt: skip
            print(
                f"peer {name:<11}{model.slug():<52}{us:>10.2f} us", flush=True
            )  # at once: a fault loses the rest only
    return rows


def slug(point: dict[str, int]) -> str:
    return load_version("mla_decode", "base").from_values(point).slug()


def roof_share(r: Row, mm: float, copy: float) -> float:
    """The share of the roof that binds the point (the useful work's time on the matmul ceiling or the copy
    ceiling, whichever is longer) that the row reached, in percent."""
    return 100 * max(r.useful_tflops / mm, r.useful_gbps / copy)


NO_REFERENCE = "b=32's row is not in this run, so the target (within 10 points of it) is n/a"


def goals(rows: list[Row], mm: float, copy: float) -> list[str]:
    """Issue 52's goals against this run's rows: at each point our fastest version (not the baseline, not a peer)."""
    best: dict[str, Row] = {}
    for r in rows:
        ours = r.version != "base" and r.version not in PEERS
        if ours and (r.params not in best or r.us < best[r.params].us):
            best[r.params] = r

    def mm_share(point: dict[str, int]) -> float | None:
        r = best.get(slug(point))
        return None if r is None else 100 * r.useful_tflops / mm

    def said(what: str, point: dict[str, int], share: float | None, target: float, of: str) -> str:
        r = best.get(slug(point))
        if r is None or share is None:
            return f"{what}: no row"
        met = "met" if share >= target else "NOT met"
        asked = f"target {target:.0f}%: {met}" if target else "no number asked"
        return f"{what}: {r.version} {r.us:.2f} us = {share:.1f}% of {of}, {asked}"

    out = []
    for b in (32, 64):
        point = {"b": b, "s": 1, "t": 4096, "h": 128}
        out.append(said(f"h=128 s=1 t=4096 b={b}", point, mm_share(point), 75, f"the bf16 mm ceiling ({mm:.0f})"))
    top = {"b": 32, "s": 16, "t": 4096, "h": 16}
    out.append(said("b=32 s=16 t=4096 h=16", top, mm_share(top), 70, f"the bf16 mm ceiling ({mm:.0f})"))
    for large, small in (({"s": 16, "t": 4096, "h": 16}, "s=16 h=16"), ({"s": 1, "t": 4096, "h": 128}, "h=128 s=1")):
        ref = mm_share({"b": 32, **large})
        for b in (4, 8, 16):
            if ref is None:  # no b=32 row in this run: nothing to be within 10 points of
                share = mm_share({"b": b, **large})
                said_share = "no row" if share is None else f"{share:.1f}% of the bf16 mm ceiling; {NO_REFERENCE}"
                out.append(f"small batch b={b} {small}: {said_share}")
                continue
            out.append(said(f"small batch b={b} {small}, within 10 points of b=32's {ref:.1f}%", {"b": b, **large},
                            mm_share({"b": b, **large}), ref - 10, "the bf16 mm ceiling"))  # fmt: skip
    for t in (1024, 4096, 8192, 16384, 32768):
        point = {"b": 32, "s": 1, "t": t, "h": 16}
        at = best.get(slug(point))
        out.append(said(f"memory-bound t={t}", point, None if at is None else 100 * at.useful_gbps / copy, 95,
                        f"the copy ceiling ({copy:.0f} GB/s)"))  # fmt: skip
    served = [(p, 0.0) for p in SERVING_POINTS if "page" in p]  # no number asked: the share is said
    for point, target in [({"b": 32, "s": 4, "t": 4096, "h": 16}, 85.0), *served]:
        at = best.get(slug(point))
        name = " ".join(f"{k}={v}" for k, v in point.items())
        out.append(said(name, point, None if at is None else roof_share(at, mm, copy), target, "the binding roof"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bench-runs", type=int, default=50)
    ap.add_argument("--out", default="out/profiles")
    ap.add_argument("--versions", default=None, help="comma-separated versions to time (default: every version)")
    ap.add_argument("--points", choices=["issue29", "serving"], default="issue29",
                    help="issue 29's five points or issue 52's rows with their goals and the peers")  # fmt: skip
    ap.add_argument("--only", default=None, help="with --points serving: comma-separated row numbers (0-based)")
    ap.add_argument("--peers", default=",".join(PEERS), help="with --points serving: the peers timed")
    ap.add_argument("--peers-only", action="store_true", help="time only the peers (with the ceilings)")
    args = ap.parse_args()
    versions = args.versions.split(",") if args.versions else find_package("mla_decode").versions()
    points = None
    if args.points == "serving":
        points = [p for i, p in enumerate(SERVING_POINTS) if not args.only or str(i) in args.only.split(",")]
    mm, copy = measured_ceilings()
    print(f"ceilings measured in this run: bf16 torch.mm 8192^3 {mm:.1f} TFLOP/s, copy {copy:.0f} GB/s")
    rows = [] if args.peers_only else run("mla_decode", versions, args.bench_runs, args.out, points)
    print_table("mla_decode", rows)
    if points is not None:  # after our rows are out: a peer's fault (FlashMLA exits on a CUDA error) loses only its own
        peers = peer_rows(points, args.bench_runs, tuple(p for p in args.peers.split(",") if p))
        print("\npeers (timed as kbench times a stage, on the same inputs in a paged cache of 64-row blocks):")
        print("\n".join(f"{r.version:<11}{r.params:<52}{r.us:>10.2f} us" for r in peers), flush=True)
        rows += peers
    mm_after, copy_after = measured_ceilings()
    print(
        f"\nceilings again after the versions: bf16 mm {mm_after:.1f} TFLOP/s, copy {copy_after:.0f} GB/s; the shares "
        "below are against the first measurement"
    )
    print("\nshare of the ceilings measured in this run, at the useful work (every version credited with the "
          "baseline's model: the attention's FLOPs and its compulsory bytes, q + the cache once + out):")  # fmt: skip
    print("\n".join(share_table(rows, mm, copy)))
    print()
    if points is None:
        print("\n".join(verdict(rows, mm)))
        return
    print("\n".join(f"{r.version:<11}{r.params:<52}{roof_share(r, mm, copy):>6.1f}% of the binding roof" for r in rows))
    print("\nissue 52's goals (each point's fastest version of ours; the peers' rows are above):")
    print("\n".join(goals(rows, mm, copy)))


if __name__ == "__main__":
    main()
