"""mla_decode v7 (Gluon) variants against v6's fused kernel, timed side by side on one GPU (triton.testing.do_bench:
L2 cleared before each call, median), with the bf16 torch.mm 8192^3 rate measured in the same run, each variant's
registers, spills and shared memory, and its error against a float64 reference. Usage (a CUDA GPU):
PYTHONPATH=src python3 scripts/mla-decode-gluon.py [b,s,t,h ...]  (default: 32,16,4096,16 and the check's shapes)"""

from __future__ import annotations

import sys
from typing import Any

import torch
import triton

from kbench.kernel.mla_decode.v6 import MlaDecodeDispatch
from kbench.kernel.mla_decode.v7 import MlaDecodeGluon, mla_v7_kernel

VARIANTS: list[dict[str, Any]] = [{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "PV_FIRST": f} for f in (False, True)]


def mm_tflops() -> float:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return 2.0 * n**3 / (triton.testing.do_bench(lambda: torch.mm(a, b), warmup=100, rep=500) * 1e-3) / 1e12


def error(plan: Any, ws: Any) -> float:
    ref = plan.reference(ws).float()
    return float((plan.output(ws).float() - ref).abs().max() / ref.abs().max())


def clocks() -> str:
    import subprocess

    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    return out.stdout.strip()


def point(b: int, s: int, t: int, h: int, mm: float) -> None:
    flops = 2.0 * b * s * h * t * (512 + 64) + 2.0 * b * s * h * t * 512
    print(f"\n== b={b} s={s} t={t} h={h}: ")
    v6 = MlaDecodeDispatch(b=b, s=s, t=t, h=h)
    v7 = MlaDecodeGluon(b=b, s=s, t=t, h=h)
    print(f"v6 fused: {v6.fused()}  v7 gluon: {v7.fused() and v7.gluon()}")
    ws = v7.setup("cuda", 0)
    rows: list[tuple[str, Any]] = []
    for stage in v6.stages():
        for cfg in stage.tuning[:6]:
            rows.append((f"v6 {stage.name} {cfg}", stage.build(ws, cfg).fn))
    if v7.fused() and v7.gluon():
        (stage,) = v7.stages()
        for cfg in VARIANTS:
            rows.append((f"v7 {cfg}", stage.build(ws, cfg).fn))
    try:  # v8 (warp-specialized, the contraction split), where this tree has it
        from kbench.kernel.mla_decode.v8 import MlaDecodeSplitQ

        v8 = MlaDecodeSplitQ(b=b, s=s, t=t, h=h)
        if v8.fused() and v8.gluon():
            (stage,) = v8.stages()
            rows.append((f"v8 {stage.tuning[0]}", stage.build(ws, stage.tuning[0]).fn))
    except ImportError:
        pass
    for name, fn in rows:
        try:
            fn()
            torch.cuda.synchronize()
            err = error(v7, ws) if "combine" not in name and "partial" not in name else float("nan")
            ms = triton.testing.do_bench(fn, warmup=50, rep=300)
        except Exception as exc:  # a variant that fails to compile or launch: said, the others still run
            print(f"{name}: FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            continue
        share = 100 * flops / (ms * 1e-3) / 1e12 / mm
        print(f"{name}: {ms * 1e3:8.1f} us  {flops / (ms * 1e-3) / 1e12:6.1f} TFLOP/s = {share:5.1f}% of mm  "
              f"err {err:.2e}  [{clocks()}]")  # fmt: skip
    for _key, kernel in mla_v7_kernel.device_caches[0][0].items() if mla_v7_kernel.device_caches else []:
        kernel._init_handles()
        print(f"  v7 kernel: {kernel.n_regs} registers, {kernel.n_spills} spills, {kernel.metadata.shared} B shared")


def main() -> None:
    mm = mm_tflops()
    name = torch.cuda.get_device_name()
    print(f"bf16 torch.mm 8192^3: {mm:.1f} TFLOP/s [{clocks()}]; {name}; triton {triton.__version__}")
    points = [tuple(int(x) for x in a.split(",")) for a in sys.argv[1:]] or [(32, 16, 4096, 16), (100, 3, 70, 4)]
    for p in points:
        point(*p, mm=mm)
    print(f"\nbf16 torch.mm again: {mm_tflops():.1f} TFLOP/s [{clocks()}]")


if __name__ == "__main__":
    main()
