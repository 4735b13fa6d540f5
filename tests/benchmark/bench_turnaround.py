"""Turnaround: wall seconds of a whole kbench command per mode and plan, and ratios to event mode:
`python -m tests.benchmark.bench_turnaround` on a CUDA machine (clocks left alone: KBENCH_LOCK_CLOCKS=0).

Each command runs as a user would type it (a fresh Python process, warm autotune and Triton caches after a first
unmeasured run); `kbench analyze` is timed on the annotation run's .ncu-rep beside a bare
`ncu_report.load_report` of the same file, in turn, 7 pairs (medians). Commands go through kbench's one subprocess
runner.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kbench.capture.tools import run

PLANS = ["vector_add", "matmul"]
MODES = ["event", "annotation", "ncu"]
ANALYZE_RUNS = 7


def timed(argv: list[str], log: Path) -> float:
    start = time.monotonic()
    done = run(argv, timeout_s=600, log_path=log, env={**os.environ, "KBENCH_LOCK_CLOCKS": "0"})
    took = time.monotonic() - start
    if done.returncode != 0:
        print(f"  {' '.join(argv[2:])} failed (exit {done.returncode}); see {log}")
    return took


def main() -> None:
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        print(f"{'plan':<12}{'mode':<12}{'wall s':>8}{'x event':>9}")
        for plan in PLANS:
            walls: dict[str, float] = {}
            for mode in MODES:
                argv = [py, "-m", "kbench.kernel", plan, f"--prof_type={mode}", "--out", str(out / "p")]
                timed(argv, out / "warm.log")  # caches warm: what a user's second run costs
                walls[mode] = timed(argv, out / f"{plan}-{mode}.log")
                print(f"{plan:<12}{mode:<12}{walls[mode]:>8.2f}{walls[mode] / walls['event']:>9.2f}")
            rep = sorted((out / "p" / "annotation" / plan).rglob("profile.ncu-rep"))[-1]
            pairs = [
                (
                    timed([py, "-m", "kbench", "analyze", str(rep), "--out", str(out / "a")], out / "an.log"),
                    timed([py, "-c", f"import ncu_report; ncu_report.load_report({str(rep)!r})"], out / "bare.log"),
                )
                for _ in range(ANALYZE_RUNS + 1)
            ][1:]  # the first pair warms the file cache and the compiled report templates
            analyze = statistics.median(a for a, _ in pairs)
            bare = statistics.median(b for _, b in pairs)
            ratio = statistics.median(a / b for a, b in pairs)
            print(
                f"{plan:<12}{'analyze':<12}{analyze:>8.2f}   ({ratio:.1f}x a bare load_report: {bare:.3f} s; medians of"
                f" {ANALYZE_RUNS} pairs)"
            )


if __name__ == "__main__":
    main()
