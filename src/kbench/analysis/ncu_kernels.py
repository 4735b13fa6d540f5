"""The kernels of each stage as Nsight Compute profiled them (annotation and ncu modes): per kernel name, its
profiled launches and their summed gpu__time_duration, the grid, block, registers and shared memory of its launch
(ncu's launch__ metrics), and the DRAM bytes it read and wrote. A live run profiles each stage once, so launches and
time are per run of the stage; an offline report may hold several runs of it, counted together (as the stage's
counters are). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kbench.analysis.kernels import StageKernel, StageKernels, is_declared, shares
from kbench.analysis.ncu import Kernel


def _dims(dims: tuple[int, int, int] | None, size: float | None) -> list[int] | None:
    """(x, y, z) where ncu gives them, else the total as one dimension."""
    if dims is not None:
        return list(dims)
    return None if size is None else [int(size)]


def _shared(k: Kernel) -> int | None:
    """Static plus dynamic shared memory per CTA (without the driver's reserve); the per-block total where ncu
    gives only that."""
    if k.own_shared_bytes is not None:
        return k.own_shared_bytes
    total = k.m("shared_bytes")
    return None if total is None else int(total)


BYTES_BY = "ncu: dram__bytes_read.sum and dram__bytes_write.sum"


def _summed(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _kernel(name: str, ks: Sequence[Kernel], declared: Sequence[str]) -> StageKernel:
    first = ks[0]
    times = [k.duration_us for k in ks]
    regs = first.m("registers")
    read, written = _summed([k.m("dram_read_bytes") for k in ks]), _summed([k.m("dram_write_bytes") for k in ks])
    return StageKernel(
        name=name,
        launches=float(len(ks)),
        us=None if any(t is None for t in times) else sum(t for t in times if t is not None),
        grid=_dims(first.grid, first.m("grid_size")),
        block=_dims(first.block, first.m("block_size")),
        registers=None if regs is None else int(regs),
        shared_bytes=_shared(first),
        declared=is_declared(name, declared),
        source="ncu",
        dram_read_bytes=read,
        dram_write_bytes=written,
        dram_bytes=None if read is None or written is None else read + written,
        bytes_by=BYTES_BY if read is not None and written is not None else None,
    )


def stage_kernels(
    grouped: Sequence[tuple[str, Sequence[Kernel]]], declared: Mapping[str, Sequence[str]]
) -> dict[str, StageKernels]:
    """Each stage's profiled kernels by name, largest first (``declared``: the plan's kernel names per stage)."""
    out: dict[str, StageKernels] = {}
    for stage, ks in grouped:
        by_name: dict[str, list[Kernel]] = {}
        for k in ks:
            by_name.setdefault(k.name, []).append(k)
        kernels = [_kernel(n, mine, declared.get(stage, ())) for n, mine in by_name.items()]
        out[stage] = StageKernels(stage=stage, kernels=shares(kernels))
    return out
