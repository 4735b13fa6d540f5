"""How the event-timing method changes the numbers: `python -m tests.benchmark.timing_methods`.

For a long compute-bound kernel (matmul 4096^3) and a short memory-bound one (vector_add 2^20) it times the
same launch with several methods, each twice in interleaved order (to expose drift from unlocked clocks), and
triton.testing.do_bench for reference: the L2 flush size, the GPU hold before the start event, CUDA graphs.
"""

from __future__ import annotations

from kbench.analysis.timing_stats import TimingStats
from kbench.capture.cupti import time_cupti
from kbench.capture.gpu import active_device
from kbench.capture.prepare import prepare_on_gpu
from kbench.capture.timing import L2Flush, l2_flush_bytes, time_cuda
from kbench.plan.discovery import load_version

METHODS = {
    "write flush 2xL2 + hold 400k": {"write_flush": True},
    "flush 2xL2": {"hold_cycles": 0},
    "flush 256MiB": {"hold_cycles": 0, "flush_bytes": 256 << 20},
    "flush 2xL2 + hold 40k cyc": {"hold_cycles": 40_000},
    "flush 2xL2 + hold 400k cyc": {"hold_cycles": 400_000},
    "graph, flush 2xL2": {"hold_cycles": 0, "cuda_graph": True},
}


def main() -> None:
    import triton.testing

    device = active_device()
    for package, version, values in [("matmul", "base", {}), ("vector_add", "base", {"n": 1 << 20})]:
        plan = load_version(package, version).from_values(values)
        fn = prepare_on_gpu(plan, device, seed=0).stages[0].launch.fn
        print(f"\n{package} {version} {plan.values()}")
        print(f"{'method':<30}{'round':>6}{'median us':>11}{'spread %':>10}{'first us':>10}{'min us':>9}")
        for rnd in (1, 2):
            for name, kw in METHODS.items():
                s = time_cuda(fn, 100, **kw)  # type: ignore[arg-type]
                t = TimingStats.of(s.us)
                print(f"{name:<30}{rnd:>6}{t.median_us:>11.2f}{t.spread_pct:>10.2f}{s.us[0]:>10.2f}{t.min_us:>9.2f}")
            ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
            print(f"{'triton do_bench':<30}{rnd:>6}{ms * 1e3:>11.2f}")
            got = time_cupti(fn, 100, L2Flush(l2_flush_bytes()))
            if not isinstance(got, str):
                t = TimingStats.of(got.us)
                row = f"{t.median_us:>11.2f}{t.spread_pct:>10.2f}{got.us[0]:>10.2f}{t.min_us:>9.2f}"
                print(f"{'CUPTI, read flush':<30}{rnd:>6}{row}")
            else:
                print(f"{'CUPTI, read flush':<30}{rnd:>6}  n/a: {got}")


if __name__ == "__main__":
    main()
