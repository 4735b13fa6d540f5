"""Measure what a GPU reaches, for conf/devices.json's `measured` block: FP32 FMA throughput (four independent chains
per element), and of its memory system: streaming bandwidth read-only,
write-only and copy (1 GiB, bytes read + written), the DRAM load latency of one dependent chain (a pointer chase
over 512 MiB at 128-byte granularity, far beyond L2), and the time one fp32 atomic add takes when every thread adds
to the same address (2^21 of them from 512 CTAs of 256 threads). Prints one JSON object; nothing is written to the
device's settings. Usage on a CUDA machine: python scripts/gpu-ceilings.py [--reps N]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton
import triton.language as tl

GIB = 1 << 30


@triton.jit
def _read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    s = tl.sum(x, axis=0)
    # one store per CTA, only when the sum is impossible: reads everything, writes (almost) nothing
    tl.store(out_ptr + tl.program_id(0), s, mask=s == -1.0)


@triton.jit
def _write_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.full((BLOCK,), 1.0, tl.float32), mask=offs < n)


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _chase_kernel(next_ptr, out_ptr, hops):
    i = tl.load(next_ptr)  # element 0 starts the chain
    for _ in range(hops):
        i = tl.load(next_ptr + i)
    tl.store(out_ptr, i)


@triton.jit
def _fma_kernel(y_ptr, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = offs.to(tl.float32) * 1e-9
    b, c, d = a + 1.0, a + 2.0, a + 3.0  # four independent chains per element
    for _ in range(STEPS):
        a = a * 0.999 + 0.5
        b = b * 0.999 + 0.5
        c = c * 0.999 + 0.5
        d = d * 0.999 + 0.5
    tl.store(y_ptr + offs, a + b + c + d)


@triton.jit
def _atomic_kernel(out_ptr, per_thread, BLOCK: tl.constexpr):
    one = tl.full((BLOCK,), 1.0, tl.float32)
    for _ in range(per_thread):
        tl.atomic_add(out_ptr + tl.zeros((BLOCK,), tl.int32), one)


def _median_ms(fn, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def streaming(reps: int) -> dict[str, float]:
    n = GIB // 4
    x = torch.rand(n, device="cuda")
    y = torch.empty_like(x)
    block = 4096
    grid = (triton.cdiv(n, block),)
    out = torch.empty(grid[0], device="cuda")
    res = {}
    for name, fn, nbytes in (
        ("read", lambda: _read_kernel[grid](x, out, n, BLOCK=block, num_warps=8), GIB),
        ("write", lambda: _write_kernel[grid](y, n, BLOCK=block, num_warps=8), GIB),
        ("copy", lambda: _copy_kernel[grid](x, y, n, BLOCK=block, num_warps=8), 2 * GIB),
        ("torch_copy", lambda: y.copy_(x), 2 * GIB),
    ):
        ms = _median_ms(fn, reps)
        res[f"{name}_gbps"] = nbytes / (ms * 1e-3) / 1e9
    return res


def latency(hops: int = 20000) -> float:
    """ns per dependent load: a random cycle over 512 MiB of 128-byte lines, one thread."""
    lines = (512 << 20) // 128
    stride = 128 // 4  # int32 elements per line
    g = torch.Generator(device="cpu").manual_seed(0)
    order = torch.randperm(lines, generator=g)
    nxt = torch.zeros(lines * stride, dtype=torch.int32)
    src = order * stride
    dst = torch.roll(order, -1) * stride
    nxt[src] = dst.to(torch.int32)
    nxt = nxt.cuda()
    out = torch.empty(1, dtype=torch.int32, device="cuda")
    _chase_kernel[(1,)](nxt, out, 100, num_warps=1)  # compile, warm the TLB a little
    torch.cuda.synchronize()
    ms_long = _median_ms(lambda: _chase_kernel[(1,)](nxt, out, hops, num_warps=1), 5)
    ms_short = _median_ms(lambda: _chase_kernel[(1,)](nxt, out, hops // 10, num_warps=1), 5)
    return (ms_long - ms_short) * 1e6 / (hops - hops // 10)


def atomic_serial_ns(ctas: int = 512, threads: int = 256, per_thread: int = 16) -> float:
    """ns per fp32 atomic add when every thread of every CTA adds to one address (they serialize in L2)."""
    out = torch.zeros(1, device="cuda")
    n = ctas * threads * per_thread
    ms = _median_ms(lambda: _atomic_kernel[(ctas,)](out, per_thread, BLOCK=threads, num_warps=threads // 32), 5)
    return ms * 1e6 / n


def fp32_fma_tflops(ctas: int = 132 * 16, block: int = 1024, steps: int = 4096) -> float:
    """FP32 FMA throughput: four independent multiply-add chains per element, 1024 elements per CTA on 8 warps."""
    y = torch.empty(ctas * block, device="cuda")
    ms = _median_ms(lambda: _fma_kernel[(ctas,)](y, STEPS=steps, BLOCK=block, num_warps=8), 10)
    return 2.0 * 4 * steps * ctas * block / (ms * 1e-3) / 1e12


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    res = {
        "device": torch.cuda.get_device_name(),
        **streaming(args.reps),
        "dram_latency_ns": latency(),
        "atomic_same_address_ns": atomic_serial_ns(),
        "fp32_fma_tflops": fp32_fma_tflops(),
    }
    print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in res.items()}))


if __name__ == "__main__":
    main()
