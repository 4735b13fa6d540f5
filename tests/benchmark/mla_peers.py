"""MLA decode's peers (issue 52): FlashInfer's Hopper MLA decode (``BatchMLAPagedAttentionWrapper``, backend "fa3")
and FlashMLA's SM90 dense decode, timed on the inputs kbench's paged MLA plan holds and with kbench's own event timing
(``capture.timing.time_cuda``: L2 flushed and the GPU held before each start, as our rows are timed), each output
checked against the caller's reference first.

Inputs: q_nope [b, s, h, d=512] and q_pe [b, s, h, p=64] bf16; the cache as a page pool kv_pool [n_pages, page, d+p]
bf16 (the first d columns the latent ckv, also the values, the last p the rotary keys); block_table [b, max_pages]
int32 (each sequence's pages in order); lens [b] int32 (cached tokens, the s new ones last: token i of s sees rows
j <= len - s + i); scale (d+p)^-0.5; output [b, s, h, d].

The peers come from the carry ``.whl-fi/`` at the repository root (built by scripts/mla-peers/build-carry.sh, installed
on the device by scripts/gpu-mla-peers.sh). `python -m tests.benchmark.mla_peers` runs the smoke points on a CUDA
machine. FlashMLA's C++ exits the process on a CUDA error (its CHECK_CUDA), so a failing FlashMLA ends the run it is
in: the device script smoke-tests each peer in a process of its own first.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import re
import statistics
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

CARRY = Path(__file__).resolve().parents[2] / ".whl-fi"
FLASHMLA_LIB = CARRY / "libflashmla_capi.so"
PEERS = ("flashinfer", "flashmla")
TOLERANCE = 2e-2  # relative L2 error against the reference above which a peer's time is not reported (bf16: ~4e-3)
FLOAT_WORKSPACE = 512 << 20  # FlashInfer's split-KV partials (its docs start at 128 MiB)
SMOKE = ("b2_s1_t256_h16", "b2_s1_t256_h128", "b2_s4_t256_h16_ragged")

# a peer ready to run: the launch (one decode step, all its kernels) and the output it writes, viewed [b, s, h, d]
Prepared = tuple[Callable[[], object], "torch.Tensor"]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "no message"
    return f"{type(exc).__name__}: {text[:240]}"


def flashinfer_csr(
    block_table: torch.Tensor, lens: torch.Tensor, s: int, page: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashInfer's CSR metadata from the block table (int32, on the CPU): qo_indptr (s query tokens per sequence),
    kv_indptr (offsets into kv_indices), kv_indices (each sequence's first ceil(len / page) pages, concatenated) and
    kv_len_arr (the cached lengths)."""
    import torch

    table, n = block_table.cpu().to(torch.int32), lens.cpu().to(torch.int64)
    pages = (n + page - 1) // page
    if int(pages.max()) > table.shape[1]:
        raise ValueError(f"a sequence needs {int(pages.max())} pages, the block table holds {table.shape[1]}")
    qo_indptr = torch.arange(len(n) + 1, dtype=torch.int32) * s
    kv_indptr = torch.zeros(len(n) + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(pages, 0).to(torch.int32)
    kv_indices = torch.cat([table[i, : int(pages[i])] for i in range(len(n))])
    return qo_indptr, kv_indptr, kv_indices, n.to(torch.int32)


def reference(
    q_nope: torch.Tensor, q_pe: torch.Tensor, kv_pool: torch.Tensor, block_table: torch.Tensor, lens: torch.Tensor
) -> torch.Tensor:
    """The decode step in float32, one sequence at a time through its pages: the smoke test's reference."""
    import torch

    b, s, h, d = q_nope.shape
    page, width = kv_pool.shape[1], kv_pool.shape[2]
    out = torch.empty(b, s, h, d, dtype=q_nope.dtype, device=q_nope.device)
    for i in range(b):
        n = int(lens[i])
        pages = block_table[i, : (n + page - 1) // page].long()
        kv = kv_pool[pages].reshape(-1, width)[:n].float()  # [n, d+p]
        q = torch.cat([q_nope[i], q_pe[i]], dim=-1).float()  # [s, h, d+p]
        scores = torch.einsum("shc,nc->shn", q, kv) * width**-0.5
        limit = n - s + torch.arange(s, device=kv.device)  # token j of s sees rows <= limit[j]
        hidden = torch.arange(n, device=kv.device)[None, :] > limit[:, None]  # [s, n]
        scores.masked_fill_(hidden[:, None, :], float("-inf"))
        out[i] = (scores.softmax(dim=-1) @ kv[:, :d]).to(out.dtype)
    return out


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float32."""
    diff = (out.float() - ref.float()).norm()
    return float(diff / ref.float().norm().clamp_min(1e-30))


def _flashinfer(
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    kv_pool: torch.Tensor,
    block_table: torch.Tensor,
    lens: torch.Tensor,
    page: int,
) -> Prepared | str:
    try:
        mla = importlib.import_module("flashinfer.mla")
    except Exception as exc:  # missing or broken install: a reason, not a crash
        return f"flashinfer not importable ({_one_line(exc)})"
    import torch

    if not q_nope.is_cuda:
        return "flashinfer: needs CUDA tensors"
    b, s, h, d = q_nope.shape
    p = q_pe.shape[-1]
    qo_indptr, kv_indptr, kv_indices, kv_len = flashinfer_csr(block_table, lens, s, page)
    wrapper = mla.BatchMLAPagedAttentionWrapper(
        torch.empty(FLOAT_WORKSPACE, dtype=torch.uint8, device=q_nope.device), backend="fa3"
    )
    # plan once, outside timing (a server plans once per batch and layer): the split-KV schedule over the lens
    wrapper.plan(
        metadata=mla.MLAPlanMetadata.csr(qo_indptr, kv_indptr, kv_indices, kv_len),
        num_heads=h,
        head_dim_ckv=d,
        head_dim_kpe=p,
        page_size=page,
        causal=s > 1,  # FlashInfer's causal: query i of s sees keys j <= len - s + i, as ours
        sm_scale=(d + p) ** -0.5,
        q_data_type=q_nope.dtype,
        kv_data_type=kv_pool.dtype,
        query_layout="split",
        kv_cache_layout="packed",
    )
    # views, no copies: the query as [b*s, h, .] tokens; the pool stays packed and fa3 takes its ckv / kpe column
    # views with the pool's page and row strides
    query = (q_nope.reshape(b * s, h, d), q_pe.reshape(b * s, h, p))
    out = torch.empty(b * s, h, d, dtype=q_nope.dtype, device=q_nope.device)

    def run() -> object:
        return wrapper.run(query=query, kv_cache=kv_pool, out=out)

    return run, out.view(b, s, h, d)


def _flashmla_lib() -> ctypes.CDLL | str:
    if not FLASHMLA_LIB.is_file():
        return f"FlashMLA not built ({FLASHMLA_LIB} missing; scripts/mla-peers/build-carry.sh builds it)"
    try:
        lib = ctypes.CDLL(str(FLASHMLA_LIB))
    except OSError as exc:
        return f"FlashMLA not loadable ({_one_line(exc)})"
    i, p, f = ctypes.c_int, ctypes.c_void_p, ctypes.c_float
    lib.flashmla_sched_meta_ints.restype = i
    lib.flashmla_num_sm_parts.argtypes, lib.flashmla_num_sm_parts.restype = [i, i, i], i
    lib.flashmla_get_metadata.argtypes, lib.flashmla_get_metadata.restype = [i, i, p, p, p, i, p], i
    lib.flashmla_dense_decode_bf16.argtypes = [i, i, i, i, p, p, p, ctypes.c_longlong, p, f, i, p, p, i, p, p, p, p, p]
    lib.flashmla_dense_decode_bf16.restype = i
    return lib


def _num_sms(t: torch.Tensor) -> int | str:
    """The SM count of ``t``'s GPU (FlashMLA splits the batch over it), or why there is none."""
    import torch

    if not t.is_cuda:
        return "FlashMLA: needs CUDA tensors"
    return int(torch.cuda.get_device_properties(t.device).multi_processor_count)


def _stream(dev: torch.device) -> int:
    """The current CUDA stream's handle on ``dev``: FlashMLA launches there, as torch's own kernels do."""
    import torch

    return int(torch.cuda.current_stream(dev).cuda_stream)


def _flashmla(
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    kv_pool: torch.Tensor,
    block_table: torch.Tensor,
    lens: torch.Tensor,
    page: int,
) -> Prepared | str:
    import torch

    b, s, h, d = q_nope.shape
    p = q_pe.shape[-1]
    if page != 64 or (d, p) != (512, 64) or q_nope.dtype != torch.bfloat16:
        return f"FlashMLA takes page 64, d 512, p 64 in bf16 only (here page {page}, d {d}, p {p}, {q_nope.dtype})"
    lib = _flashmla_lib()
    if isinstance(lib, str):
        return lib
    sms = _num_sms(q_nope)
    if isinstance(sms, str):
        return sms
    dev = q_nope.device
    parts = lib.flashmla_num_sm_parts(sms, s, h)
    step = _FlashMlaStep(
        lib,
        (d + p) ** -0.5,
        # FlashMLA takes the query as one [b, s, h, d+p] tensor: concatenated once here, outside timing
        q=torch.cat([q_nope, q_pe], dim=-1).contiguous(),
        pool=kv_pool.contiguous(),
        table=block_table.to(dev, torch.int32).contiguous(),
        seqlens=lens.to(dev, torch.int32).contiguous(),
        meta=torch.empty(parts, lib.flashmla_sched_meta_ints(), dtype=torch.int32, device=dev),
        splits=torch.empty(b + 1, dtype=torch.int32, device=dev),
        out=torch.empty(b, s, h, d, dtype=q_nope.dtype, device=dev),
        lse=torch.empty(b, s * h, dtype=torch.float32, device=dev),
        # at most one split per sequence plus one per SM part that stops inside a sequence (dense_decode.h)
        lse_accum=torch.empty(b + parts, s * h, dtype=torch.float32, device=dev),
        o_accum=torch.empty(b + parts, s * h, d, dtype=torch.float32, device=dev),
    )
    # get_mla_metadata once, outside timing (FlashMLA's own benchmark reuses it across calls)
    rc = lib.flashmla_get_metadata(
        b, s, step.seqlens.data_ptr(), step.meta.data_ptr(), step.splits.data_ptr(), parts, _stream(dev)
    )
    if rc:
        return f"FlashMLA get_mla_metadata: CUDA error {rc}"
    return step, step.out


@dataclass
class _FlashMlaStep:
    """One FlashMLA decode step ready to launch; it holds every tensor whose address the C side is given. ctypes
    passes bare addresses, which keep nothing alive: a buffer named only there goes back to torch's caching
    allocator, whose next allocations (the timer's L2-flush scratch, its reduction's workspace) then write over the
    schedule and the split buffers between launches (combine.cu's `my_num_splits <= MAX_SPLITS`, illegal addresses)."""

    lib: Any
    scale: float
    q: torch.Tensor  # [b, s, h, d+p] bf16
    pool: torch.Tensor  # [pages, 64, d+p] bf16
    table: torch.Tensor  # [b, max_pages] int32
    seqlens: torch.Tensor  # [b] int32
    meta: torch.Tensor  # [num_sm_parts, sched_meta_ints] int32, written by get_mla_metadata
    splits: torch.Tensor  # [b + 1] int32, each sequence's first split, written by get_mla_metadata
    out: torch.Tensor  # [b, s, h, d] bf16
    lse: torch.Tensor  # [b, s*h] float32
    lse_accum: torch.Tensor  # [b + num_sm_parts, s*h] float32
    o_accum: torch.Tensor  # [b + num_sm_parts, s*h, d] float32
    args: tuple[object, ...] = field(init=False)  # the launch's arguments but the stream, taken once

    def __post_init__(self) -> None:
        b, s, h, _ = self.q.shape
        self.args = (
            b, s, h, self.pool.shape[0], self.q.data_ptr(), self.pool.data_ptr(), self.table.data_ptr(),
            self.table.stride(0), self.seqlens.data_ptr(), self.scale, int(s > 1), self.meta.data_ptr(),
            self.splits.data_ptr(), self.meta.shape[0], self.out.data_ptr(), self.lse.data_ptr(),
            self.lse_accum.data_ptr(), self.o_accum.data_ptr(),
        )  # fmt: skip

    def __call__(self) -> torch.Tensor:
        code = self.lib.flashmla_dense_decode_bf16(*self.args, _stream(self.q.device))
        if code:
            raise RuntimeError(f"FlashMLA dense decode: CUDA error {code}")
        return self.out


def peer_times(
    point: Mapping[str, Any],
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    kv_pool: torch.Tensor,
    block_table: torch.Tensor,
    lens: torch.Tensor,
    page: int,
    reps: int,
    ref: torch.Tensor | None = None,
    peers: tuple[str, ...] = PEERS,
) -> dict[str, float | str]:
    """Each peer's median time in microseconds at ``point`` (kbench's event timing, ``reps`` repetitions after its
    warm-up), or one line saying why it did not run. With ``ref`` ([b, s, h, d]) each output is compared first: the
    relative L2 error is reported under "<peer> rel_l2", and a peer off by more than TOLERANCE gets a reason instead of
    a time. ``point``'s b, s and h, where given, must match the tensors."""
    b, s, h, _ = q_nope.shape
    for key, size in (("b", b), ("s", s), ("h", h)):
        if key in point and int(point[key]) != size:
            raise ValueError(f"point {dict(point)} has {key}={point[key]}, the query {key}={size}")
    builders = {"flashinfer": _flashinfer, "flashmla": _flashmla}
    results: dict[str, float | str] = {}
    for name in peers:
        try:
            made = builders[name](q_nope, q_pe, kv_pool, block_table, lens, page)
            if isinstance(made, str):
                results[name] = made
                continue
            run, out = made
            results[name] = _timed(name, run, out, reps, ref, results)
        except Exception as exc:  # a peer that fails is a row's reason, not the benchmark's end
            results[name] = f"{name} failed: {_one_line(exc)}"
    return results


def _timed(
    name: str,
    run: Callable[[], object],
    out: torch.Tensor,
    reps: int,
    ref: torch.Tensor | None,
    results: dict[str, float | str],
) -> float | str:
    import torch

    from kbench.capture.timing import time_cuda

    run()
    torch.cuda.synchronize()
    if ref is not None:
        err = rel_l2(out, ref)
        results[f"{name} rel_l2"] = err
        if not err <= TOLERANCE:  # NaN included
            return f"{name}: output off the reference (relative L2 {err:.3g} > {TOLERANCE}), not timed"
    return float(statistics.median(time_cuda(run, reps).us))


def _parse_point(text: str) -> dict[str, int | bool]:
    m = re.fullmatch(r"b(\d+)_s(\d+)_t(\d+)_h(\d+)(_ragged)?", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: a point is b<B>_s<S>_t<T>_h<H>[_ragged]")
    b, s, t, h = (int(g) for g in m.groups()[:4])
    return {"b": b, "s": s, "t": t, "h": h, "ragged": m.group(5) is not None}


def make_inputs(
    b: int, s: int, t: int, h: int, ragged: bool, page: int = 64, seed: int = 0
) -> tuple[torch.Tensor, ...]:
    """Random inputs in the layout above: a pool of shuffled pages (one spare), ragged lens in [t/2, t] or all t."""
    import torch

    g = torch.Generator().manual_seed(seed)
    lens = torch.full((b,), t, dtype=torch.int32)
    if ragged:
        lens = torch.randint(max(t // 2, s), t + 1, (b,), generator=g, dtype=torch.int32)
        lens[0] = t
    per_seq = (t + page - 1) // page
    n_pages = b * per_seq + 1
    table = torch.randperm(n_pages, generator=g)[: b * per_seq].view(b, per_seq).to(torch.int32)
    dev, dt = "cuda", torch.bfloat16
    q_nope = torch.randn(b, s, h, 512, generator=g).to(dev, dt)
    q_pe = torch.randn(b, s, h, 64, generator=g).to(dev, dt)
    kv_pool = torch.randn(n_pages, page, 576, generator=g).to(dev, dt)
    return q_nope, q_pe, kv_pool, table.to(dev), lens.to(dev)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("points", nargs="*", type=_parse_point, help=f"b<B>_s<S>_t<T>_h<H>[_ragged] (default {SMOKE})")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated, of " + ", ".join(PEERS))
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args(argv)
    import torch

    peers = tuple(p for p in args.peers.split(",") if p)
    if unknown := [p for p in peers if p not in PEERS]:
        ap.error(f"unknown peer(s) {unknown}")
    failed = False
    for pt in args.points or [_parse_point(x) for x in SMOKE]:
        shape = {k: int(v) for k, v in pt.items() if k != "ragged"}
        q_nope, q_pe, kv_pool, table, lens = make_inputs(**shape, ragged=bool(pt["ragged"]))
        ref = reference(q_nope, q_pe, kv_pool, table, lens)
        res = peer_times(shape, q_nope, q_pe, kv_pool, table, lens, 64, args.reps, ref=ref, peers=peers)
        torch.cuda.synchronize()
        label = "_".join(f"{k}{v}" for k, v in shape.items()) + ("_ragged" if pt["ragged"] else "")
        for name in peers:
            value, err = res[name], res.get(f"{name} rel_l2")
            said = f"{value:.2f} us" if isinstance(value, float) else f"not timed: {value}"
            print(f"{label:<26}{name:<12}{said}" + ("" if err is None else f"   (rel L2 {float(err):.2e})"))
            failed |= not isinstance(value, float)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
