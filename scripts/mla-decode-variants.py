"""The mla_decode v2 variants behind docs/kernels/mla_decode.md's issue-29 table, timed side by side on one GPU
(triton.testing.do_bench: L2 cleared before each call, median), each with its registers, spills, shared memory,
wgmma shapes and asynchronous copies (the compiled kernel), and its error against a float64 reference on two
sequences. b=32 s=16 t=4096 h=16 d=512 p=64 bf16 (the compute-bound point); the chain pair's kernel at d=128 last.
Usage (a CUDA GPU): PYTHONPATH=src python3 scripts/mla-decode-variants.py"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kbench.kernel.mla_decode._triton import queries, softmax_step, visible
from kbench.kernel.mla_decode.v2 import mla_v2_fused_kernel
from kbench.kernel.mla_decode.v4 import mla_v4_fused_kernel
from kbench.kernel.mla_decode.v5 import mla_v5_fused_kernel

B, S, T, H, D, P = 32, 16, 4096, 16, 512, 64
R = S * H
FLOPS = 2.0 * B * R * T * (D + P) + 2.0 * B * R * T * D


@triton.jit
def options_kernel(q_nope_ptr, q_pe_ptr, kv_ptr, o_ptr, scale, s, t, R, H: tl.constexpr, D: tl.constexpr,  # type: ignore[no-untyped-def]
                   P: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LAZY: tl.constexpr,
                   WS: tl.constexpr):  # fmt: skip
    """v2's loop with the tiles every row sees run unmasked, and optionally lazy rescaling (the running max moves
    only when it grows by more than 8, acc *= alpha only then) or Triton's warp specialization."""
    LOG2E: tl.constexpr = 1.4426950408889634
    b = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < R
    dd = tl.arange(0, D)
    pp = tl.arange(0, P)
    qn, qp = queries(q_nope_ptr, q_pe_ptr, b, rows, R, D, P)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    total = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    free = ((t - s + 1) // BLOCK_N) * BLOCK_N  # every row sees the cache rows below t - s + 1
    for c0 in tl.range(0, free, BLOCK_N, warp_specialize=WS):
        tile = kv_ptr + (b * t + c0 + tl.arange(0, BLOCK_N)[:, None]) * (D + P)
        v = tl.load(tile + dd[None, :])
        kp = tl.load(tile + D + pp[None, :])
        sc = (tl.dot(qn, tl.trans(v)) + tl.dot(qp, tl.trans(kp))) * (scale * LOG2E)
        m_cand = tl.maximum(m, tl.max(sc, axis=1))
        m_new = tl.where(m_cand > m + 8.0, m_cand, m) if LAZY else m_cand
        alpha = tl.exp2(m - m_new)
        prob = tl.exp2(sc - m_new[:, None])
        total = total * alpha + tl.sum(prob, axis=1)
        if LAZY:
            if tl.min(alpha, axis=0) < 1.0:
                acc = acc * alpha[:, None]
            acc = tl.dot(prob.to(v.dtype), v, acc)
        else:
            acc = acc * alpha[:, None] + tl.dot(prob.to(v.dtype), v)
        m = m_new
    for c0 in range(free, t, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        cmask = cols < t
        tile = kv_ptr + (b * t + cols[:, None]) * (D + P)
        v = tl.load(tile + dd[None, :], mask=cmask[:, None], other=0.0)
        kp = tl.load(tile + D + pp[None, :], mask=cmask[:, None], other=0.0)
        sc = (tl.dot(qn, tl.trans(v)) + tl.dot(qp, tl.trans(kp))) * (scale * LOG2E)
        sc = tl.where(visible(rows, cols, s, t, H) & cmask[None, :], sc, float("-inf"))
        m, alpha, prob, total = softmax_step(sc, m, total)
        acc = acc * alpha[:, None] + tl.dot(prob.to(v.dtype), v)
    out = acc / total[:, None]
    tl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty), mask=rmask[:, None])


def facts(k: Any) -> str:
    ptx = k.asm["ptx"]
    shapes: dict[str, int] = {}
    for shape in re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx):
        shapes[shape] = shapes.get(shape, 0) + 1
    copies = len(re.findall(r"cp\.async\.c[ag]", ptx)) + len(re.findall(r"cp\.async\.bulk\.tensor", ptx))
    wgmma = " ".join(f"{s} x{n}" for s, n in sorted(shapes.items()))
    return f"regs {k.n_regs:3d} spills {k.n_spills:3d} smem {k.metadata.shared:6d} async copies {copies:3d} {wgmma}"


def main() -> None:
    torch.manual_seed(0)
    dt = torch.bfloat16
    q_nope = torch.randn(B, S, H, D, device="cuda").to(dt)
    q_pe = torch.randn(B, S, H, P, device="cuda").to(dt)
    kv = torch.randn(B, T, D + P, device="cuda").to(dt)
    scale = 1.0 / math.sqrt(D + P)
    q = torch.cat([q_nope[:2], q_pe[:2]], -1).double()
    sc = torch.einsum("bshc,btc->bsht", q, kv[:2].double()) * scale
    pos = torch.arange(T, device="cuda")
    limit = T - S + torch.arange(S, device="cuda")
    sc = sc.masked_fill((pos[None, :] > limit[:, None])[None, :, None, :], float("-inf"))
    exact = torch.einsum("bsht,btd->bshd", sc.softmax(-1), kv[:2, :, :D].double())
    shape = {"scale": scale, "s": S, "t": T, "R": R, "H": H, "D": D, "P": P}
    out = torch.empty(B, S, H, D, device="cuda", dtype=dt)
    probs = torch.empty(B * (R // 64) * 2 * 64 * 64, device="cuda", dtype=torch.float32)  # the inline-PTX variant's
    probs_bf16 = torch.empty(B * (R // 64) * 2 * 64 * 64, device="cuda", dtype=dt)  # v4's, in the element type
    alpha = torch.empty(B * (R // 64) * 2 * 64, device="cuda", dtype=torch.float32)
    rows2d = kv.view(B * T, D + P)

    def tma(bn: int) -> tuple[TensorDescriptor, TensorDescriptor]:
        return (TensorDescriptor(rows2d, [B * T, D + P], [D + P, 1], [bn, D]),
                TensorDescriptor(rows2d, [B * T, D + P], [D + P, 1], [bn, P]))  # fmt: skip

    grid = (R // 64, B)
    variants: list[tuple[str, Callable[[], Any]]] = [
        ("v2 (BLOCK_N=64, 8 warps, 2 stages)", lambda: mla_v2_fused_kernel[grid](
            q_nope, q_pe, kv, out, **shape, BLOCK_M=64, BLOCK_N=64, num_warps=8, num_stages=2)),
        ("num_warps=4", lambda: mla_v2_fused_kernel[grid](
            q_nope, q_pe, kv, out, **shape, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)),
        ("BLOCK_N=128, 1 stage (cp.async)", lambda: mla_v2_fused_kernel[grid](
            q_nope, q_pe, kv, out, **shape, BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=1)),
        ("BLOCK_N=32, 3 stages", lambda: mla_v2_fused_kernel[grid](
            q_nope, q_pe, kv, out, **shape, BLOCK_M=64, BLOCK_N=32, num_warps=8, num_stages=3)),
        ("BLOCK_N=128, 1 stage, TMA", lambda: mla_v5_fused_kernel[grid](
            q_nope, q_pe, *tma(128), out, **shape, BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=1)),
        ("TMA tiles (v5)", lambda: mla_v5_fused_kernel[grid](
            q_nope, q_pe, *tma(64), out, **shape, BLOCK_M=64, BLOCK_N=64, num_warps=8, num_stages=2)),
        ("P through scratch, tl.debug_barrier (v4)", lambda: mla_v4_fused_kernel[grid](
            q_nope, q_pe, kv, out, probs_bf16, alpha, **shape, BLOCK_M=64, BLOCK_N=64, num_warps=8, num_stages=2)),
        ("P through scratch, inline PTX", lambda: mla_v4_fused_kernel[grid](
            q_nope, q_pe, kv, out, probs, alpha, **shape, BLOCK_M=64, BLOCK_N=64, PTX=True, num_warps=8,
            num_stages=2)),
        ("unmasked main loop", lambda: options_kernel[grid](
            q_nope, q_pe, kv, out, **shape, BLOCK_M=64, BLOCK_N=64, LAZY=False, WS=False, num_warps=8, num_stages=2)),
        ("unmasked, lazy rescaling", lambda: options_kernel[grid](
            q_nope, q_pe, kv, out, **shape, BLOCK_M=64, BLOCK_N=64, LAZY=True, WS=False, num_warps=8, num_stages=2)),
        ("unmasked, warp_specialize=True", lambda: options_kernel[grid](
            q_nope, q_pe, kv, out, **shape, BLOCK_M=64, BLOCK_N=64, LAZY=False, WS=True, num_warps=8, num_stages=2)),
    ]  # fmt: skip
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton {triton.__version__}")
    print(f"b={B} s={S} t={T} h={H} d={D} p={P} bf16: {FLOPS:.4g} FLOPs (the model)")
    for name, go in variants:
        try:
            k = go()
            torch.cuda.synchronize()
            ms = triton.testing.do_bench(go, warmup=50, rep=300)
            err = float((out[:2].double() - exact).norm() / exact.norm())
            print(f"{name:<44} {ms * 1e3:7.1f} us {FLOPS / ms / 1e9:6.1f} TFLOP/s  error {err:.1e}  {facts(k)}")
        except Exception as e:  # a variant that does not fit (shared memory) is a row saying so
            print(f"{name:<44} failed: {type(e).__name__}: {str(e)[:160]}")
    # the chain pair's kernel: v2 at d=128, two warpgroups against one
    d2 = 128
    qn2 = q_nope[..., :d2].contiguous()
    kv2 = torch.cat([kv[..., :d2], kv[..., D:]], -1).contiguous()
    o2 = torch.empty(B, S, H, d2, device="cuda", dtype=dt)
    shape2 = {**shape, "scale": 1.0 / math.sqrt(d2 + P), "D": d2}
    for warps in (8, 4):

        def go2(warps: int = warps) -> Any:
            return mla_v2_fused_kernel[grid](qn2, q_pe, kv2, o2, **shape2, BLOCK_M=64, BLOCK_N=64, num_warps=warps,
                                             num_stages=2)  # fmt: skip

        k = go2()
        ms = triton.testing.do_bench(go2, warmup=50, rep=300)
        print(f"{f'd=128, num_warps={warps}':<44} {ms * 1e3:7.1f} us  {facts(k)}")


if __name__ == "__main__":
    main()
