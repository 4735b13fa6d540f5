"""Event-mode stage time vs `triton.testing.do_bench` on the same compiled kernel and config.

`python -m tests.benchmark.compare_do_bench [--bench-runs N]`: both flush L2 between repetitions and report
a median, so they should agree within the run-to-run spread.
"""

from __future__ import annotations

import argparse

from kbench.api import event_profile_plan
from kbench.capture.gpu import active_device
from kbench.capture.prepare import prepare_on_gpu
from kbench.plan.discovery import load_version


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bench-runs", type=int, default=100)
    ap.add_argument("--out", default="out/profiles")
    args = ap.parse_args()
    import triton.testing

    print(f"{'plan':<22}{'event median (us)':>19}{'spread %':>10}{'do_bench median (us)':>22}{'event/do_bench':>16}")
    for version in ("base", "v2", "torch_mm"):
        plan = load_version("matmul", version).from_values({})
        r = event_profile_plan(plan, out_dir=args.out, bench_runs=args.bench_runs)
        prep = prepare_on_gpu(plan, active_device(), seed=0)  # same config: the autotune cache answers
        fn = prep.stages[0].launch.fn
        db_ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        ev = r.stage("mm").timing
        print(
            f"{'matmul ' + version:<22}{ev.median_us:>19.2f}{ev.spread_pct:>10.2f}{db_ms * 1e3:>22.2f}"
            f"{ev.median_us / (db_ms * 1e3):>16.3f}"
        )


if __name__ == "__main__":
    main()
