"""On a CUDA machine with cupti-python and ncu_report: PM sampling rounds (8192^3 bf16 matmuls) in a process where
Nsight Compute's libnvperf_host.so (ncu_report's) was loaded first (foreign), where CUPTI's own was loaded first by
kbench.metric_libraries.claim (own), or where ncu_report never loads (none); prints which copies are mapped and each
round's highest value per metric. Count the driver's `pSmIssueThrottleCtrl` assertions in dmesg around each run
(kbench.metric_libraries cites the result, taken with c57b6cf's sampler, which used whatever copy was loaded; with
today's, "foreign" is refused in one line and "none" claims CUPTI's copy first, as "own" does).

Usage: python scripts/metric-library-order.py {foreign|own|none} ROUNDS
"""

from __future__ import annotations

import faulthandler
import os
import sys
from pathlib import Path

import torch

from kbench import metric_libraries, ncu_preload
from kbench.capture.sampling import Sampler


def mapped() -> list[str]:
    return [str(p) for p in metric_libraries.mapped(Path("/proc/self/maps").read_text())]


def main(order: str, rounds: int) -> None:
    faulthandler.enable()
    torch.zeros(1, device="cuda")
    if order == "own":
        print("claim:", metric_libraries.claim(), flush=True)
    if order in ("own", "foreign"):
        library = ncu_preload.library()
        if library is not None:
            metric_libraries.dlopen(library, os.RTLD_LAZY | os.RTLD_DEEPBIND)  # as ncu_report opens its copy
    print(order, "before sampling:", mapped(), flush=True)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    highest: list[list[float]] = []
    for _ in range(rounds):
        sampler = Sampler.open(0)
        if isinstance(sampler, str):
            print("open:", sampler, flush=True)
            break
        got = sampler.round(lambda: x @ x, 20, None, 0)
        sampler.close()
        if isinstance(got, str):
            print("round:", got, flush=True)
            continue
        columns = list(zip(*[values for _, _, values in got["samples"]], strict=True))
        highest.append([round(max(c), 1) for c in columns])
    print(order, "after:", mapped(), flush=True)
    print(order, "highest per metric, each round:", highest, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
