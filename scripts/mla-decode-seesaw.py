"""mla_decode's Gluon versions side by side on one GPU (default v10 and v11, the seesaw schedule): each version's
tuned cuts (v11-v13: with the schedule's variants, STAGGER and EARLY_Y), all of a version's stages run back to back
and timed together with triton.testing.do_bench (L2 cleared before each call, median), the bf16 torch.mm 8192^3 rate
measured in the same run before and after, and each row's error against a float64 reference.
Usage (a CUDA GPU):
    PYTHONPATH=src python3 scripts/mla-decode-seesaw.py [--versions v10,v11,...] [b,s,t,h[,t_min,page] ...]"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import torch
import triton

from kbench.plan.discovery import load_version

POINTS = [(32, 16, 4096, 16), (32, 1, 4096, 128), (64, 1, 4096, 128), (32, 4, 4096, 16), (8, 16, 4096, 16)]


def mm_tflops() -> float:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = float(triton.testing.do_bench(lambda: torch.mm(a, b), warmup=100, rep=500))
    return 2.0 * n**3 / (ms * 1e-3) / 1e12


def clocks() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    return out.stdout.strip()


def runner(plan: Any, ws: Any, cfg: dict[str, Any]) -> Callable[[], None]:
    """Every stage of ``plan``, its first with ``cfg``, the rest with their first tuning."""
    stages = plan.stages()
    fns = [stages[0].build(ws, cfg).fn] + [st.build(ws, st.tuning[0]).fn for st in stages[1:]]

    def run() -> None:
        for fn in fns:
            fn()

    return run


def point(values: tuple[int, ...], mm: float, versions: list[str]) -> None:
    b, s, t, h, *serve = values
    params = {"b": b, "s": s, "t": t, "h": h, **({"t_min": serve[0], "page": serve[1]} if serve else {})}
    print(f"\n== {params}")
    rows: list[tuple[str, Callable[[], None], Any, Any]] = []
    ref = None
    for version in versions:  # each its own workspace: v13's partials are in the output's type
        plan = load_version("mla_decode", version).from_values(params)
        ws = plan.setup("cuda", 0)
        ref = plan.reference(ws).float() if ref is None else ref
        for cfg in plan.stages()[0].tuning:  # each cut with each of the schedule's variants
            rows.append((f"{version} {cfg}", runner(plan, ws, cfg), plan, ws))
    flops = rows[0][2].qk_flops() + rows[0][2].pv_flops()
    for name, fn, plan, ws in rows:
        try:
            ws.out.zero_()
            fn()
            torch.cuda.synchronize()
            err = float((plan.output(ws).float() - ref).abs().max() / ref.abs().max())
            ms = float(triton.testing.do_bench(fn, warmup=50, rep=300))
        except Exception as exc:  # a variant that fails to compile or launch: said, the others still run
            print(f"{name}: FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            continue
        tf = flops / (ms * 1e-3) / 1e12
        share = 100 * tf / mm
        print(f"{name}: {ms * 1e3:8.1f} us  {tf:6.1f} TFLOP/s = {share:5.1f}% of mm  err {err:.2e}  [{clocks()}]")


def main() -> None:
    mm = mm_tflops()
    name = torch.cuda.get_device_name()
    print(f"bf16 torch.mm 8192^3: {mm:.1f} TFLOP/s [{clocks()}]; {name}; triton {triton.__version__}")
    args = sys.argv[1:]
    versions = ["v10", "v11"]
    if args[:1] == ["--versions"]:
        versions, args = args[1].split(","), args[2:]
    points = [tuple(int(x) for x in a.split(",")) for a in args] or POINTS
    for p in points:
        point(p, mm, versions)
    from kbench.kernel.mla_decode.v11 import mla_v11_kernel

    for _key, kernel in mla_v11_kernel.device_caches[0][0].items() if mla_v11_kernel.device_caches else []:
        kernel._init_handles()
        print(f"  v11 kernel: {kernel.n_regs} registers, {kernel.n_spills} spills, {kernel.metadata.shared} B shared")
    print(f"\nbf16 torch.mm again: {mm_tflops():.1f} TFLOP/s [{clocks()}]")


if __name__ == "__main__":
    main()
