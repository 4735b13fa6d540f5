"""What a kernel's memory accesses, traced under the CPU interpreter (kbench.capture.access), say per source line:
bytes moved, masked lanes, the address stride between neighbouring lanes and the bytes used per 32-byte sector it
implies, reuse of the same addresses across programs, and accesses out of bounds. All of it is predicted on a CPU:
which lanes form a warp is the compiler's choice. Triton's coalescing pass lays the pointer tensor's most contiguous
axis fastest (its axis analysis: the axis along which neighbouring addresses are one element apart), else the last
one; here the axis whose neighbouring addresses are one element apart most often, else the last, is taken as the
fastest, and 32 consecutive lanes along it stand for a warp.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kbench.analysis.access_facts import SECTOR, SiteFacts

WARP = 32


def fastest_last(addresses: Any, mask: Any, elem: int) -> tuple[Any, Any]:
    """The pointer tensor and its mask with the axis the compiler would lay fastest moved last: the one whose
    neighbouring addresses (masked lanes too: the compiler reads the pointer arithmetic, not the mask) are one
    element apart most often, the last axis where none beats it."""
    if addresses.ndim < 2:
        return addresses, mask
    share = [
        float(np.mean(np.diff(addresses, axis=a) == elem)) if addresses.shape[a] > 1 else 0.0
        for a in range(addresses.ndim)
    ]
    best = max(range(addresses.ndim), key=lambda a: (share[a], a))
    if best == addresses.ndim - 1 or share[best] <= share[-1]:
        return addresses, mask
    return np.moveaxis(addresses, best, -1), np.moveaxis(mask, best, -1)


def _strides(addresses: Any, mask: Any) -> Any:
    if addresses.ndim == 0 or addresses.shape[-1] < 2:
        return np.empty(0, dtype=np.int64)
    step = addresses[..., 1:] - addresses[..., :-1]
    both = mask[..., 1:] & mask[..., :-1]
    return step[both]


def _sectors(addresses: Any, mask: Any, elem: int) -> tuple[int, int]:
    """(bytes the active lanes move, sectors they touch), a warp's 32 lanes at a time: the distinct sectors of the
    first and last byte of each active lane, per warp (rows of 32 lanes, sorted: no global sort)."""
    flat, on = addresses.reshape(-1), mask.reshape(-1)
    active = int(on.sum())
    if active == 0:
        return 0, 0
    pad = (-flat.size) % WARP
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, dtype=flat.dtype)])
        on = np.concatenate([on, np.zeros(pad, dtype=bool)])
    first = np.where(on, flat // SECTOR, -1).reshape(-1, WARP)
    last = np.where(on, (flat + elem - 1) // SECTOR, -1).reshape(-1, WARP)
    rows = np.sort(np.concatenate([first, last], axis=1), axis=1)
    fresh = np.concatenate([rows[:, :1] >= 0, (rows[:, 1:] != rows[:, :-1]) & (rows[:, 1:] >= 0)], axis=1)
    return active * elem, int(fresh.sum())


def sites(accesses: Sequence[Any], whole: bool = True) -> list[SiteFacts]:
    """Per (kind, site), in the order the sites first ran; counts weighted by the programs each traced one stands
    for (``Access.weight``). ``whole``: every program ran, so reuse across programs and distinct bytes are known."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for a in accesses:
        groups.setdefault((a.kind, a.site), []).append(a)
    out = []
    for (kind, site), traced_calls in groups.items():
        calls = []
        for c in traced_calls:  # as the compiler lays them: the most contiguous axis fastest
            addresses, mask = fastest_last(c.addresses, c.mask, c.elem_bytes)
            calls.append(replace(c, addresses=addresses, mask=mask))
        lanes = sum(int(c.mask.size) * c.weight for c in calls)
        active = sum(int(c.mask.sum()) * c.weight for c in calls)
        steps = np.concatenate([_strides(c.addresses, c.mask) for c in calls])
        values, counts = np.unique(steps, return_counts=True) if steps.size else (np.empty(0), np.empty(0))
        moved = touched = 0
        for c in calls:
            m, t = _sectors(c.addresses, c.mask, c.elem_bytes)
            moved, touched = moved + m * c.weight, touched + t * c.weight
        distinct = 0
        if whole and active:
            distinct = int(np.unique(np.concatenate([c.addresses[c.mask] for c in calls])).size)
        traced = sum(int(c.mask.sum()) for c in calls)
        wild = [c for c in calls if c.out_of_bounds]
        out.append(
            SiteFacts(
                kind=kind,
                site=site,
                function=calls[0].function,
                calls=len(calls),
                programs=len({c.program for c in calls}),
                lanes=lanes,
                active=active,
                bytes=moved,
                stride_bytes=int(values[int(np.argmax(counts))]) if steps.size else None,
                bytes_per_sector=moved / touched if touched else None,
                reuse=traced / distinct if distinct and whole else None,
                out_of_bounds=sum(c.out_of_bounds for c in calls),
                first_oob_program=wild[0].program if wild else None,
                sectors=touched,
                distinct_bytes=distinct * calls[0].elem_bytes if whole else None,
            )
        )
    return out


def distinct_bytes(accesses: Sequence[Any]) -> dict[str, int]:
    """Per stage (``Access.stage``): the bytes at distinct addresses its loads read plus those its stores and atomics
    write, as DRAM would move them once each; meaningful where every program ran."""
    out: dict[str, int] = {}
    groups: dict[tuple[str, bool], list[Any]] = {}
    for a in accesses:
        groups.setdefault((a.stage, a.kind == "load"), []).append(a)
    for (name, _), calls in groups.items():
        active = [c for c in calls if c.mask.any()]
        if not active:
            out.setdefault(name, 0)
            continue
        first = np.concatenate([c.addresses[c.mask] for c in active])
        elem = np.concatenate([np.full(int(c.mask.sum()), c.elem_bytes) for c in active])
        _, where = np.unique(first, return_index=True)
        out[name] = out.get(name, 0) + int(elem[where].sum())
    return out


def program_work(accesses: Sequence[Any]) -> dict[str, Any] | None:
    """How evenly the traced programs share a stage's work: per program, the bytes its active lanes load and store;
    the largest, the mean over the programs the traced ones stand for (``Access.weight``), how many were traced and
    the three largest (program and bytes). Programs of several launches with the same index count as one. None
    where no lane was active."""
    work: dict[tuple[int, int, int], int] = defaultdict(int)
    weight: dict[tuple[int, int, int], int] = {}
    for a in accesses:
        work[a.program] += int(a.mask.sum()) * a.elem_bytes
        weight[a.program] = a.weight
    total = sum(weight.values())
    if not work or not max(work.values()) or not total:
        return None
    longest = sorted(work, key=lambda p: -work[p])[:3]
    return {
        "max_bytes": float(max(work.values())),
        "mean_bytes": sum(work[p] * weight[p] for p in work) / total,
        "traced": len(work),
        "longest": [[list(p), work[p]] for p in longest],
    }


MAX_CELLS = 1 << 20  # a picture's cells at most: a larger window is drawn every k-th row (and column)


@dataclass(frozen=True)
class Touched:
    """Which program first read and first wrote each element of one tensor (-1: none; programs numbered in the order
    they ran), over the window of it the programs touched: the tensor as rows of its last axis (a 1-D tensor as rows
    of 64 elements), rows ``first_row`` to ``first_row + step * len(read)``, every ``step``-th row and column."""

    name: str
    shape: tuple[int, ...]
    read: Any  # 2-D: the window's rows x its columns
    written: Any
    first_row: int = 0
    step: int = 1
    rows: int = 0  # the tensor's rows, as folded

    @property
    def window(self) -> str:
        last = self.first_row + self.step * (self.read.shape[0] - 1)
        every = f", every {self.step}-th row and column" if self.step > 1 else ""
        return f"rows {self.first_row}-{last} of {self.rows}{every}"


def touched(
    accesses: Sequence[Any], tensors: Sequence[tuple[str, int, int, tuple[int, ...]]], programs: int | None = None
) -> list[Touched]:
    """Per tensor (name, data address, element size, shape) that the first ``programs`` programs (None: all) touched:
    which of them first read and first wrote each element, over the window they touched."""
    order: dict[tuple[int, int, int], int] = {}
    for a in accesses:
        order.setdefault(a.program, len(order))
    shown = [a for a in accesses if programs is None or order[a.program] < programs]
    out = []
    for name, start, elem, shape in tensors:
        count = int(np.prod(shape)) if shape else 1
        width = int(shape[-1]) if len(shape) > 1 else 64
        hits: list[tuple[str, Any, int]] = []
        for a in shown:
            lanes = a.addresses[a.mask]
            inside = lanes[(lanes >= start) & (lanes < start + count * elem)]
            if inside.size:
                hits.append((a.kind, (inside - start) // elem, order[a.program]))
        if not hits:
            continue
        every = np.concatenate([h[1] for h in hits])
        first, last = int(every.min()) // width, int(every.max()) // width
        step = max(1, int(np.ceil(np.sqrt((last - first + 1) * width / MAX_CELLS))))
        size = ((last - first) // step + 1, (width - 1) // step + 1)
        maps = {"load": np.full(size, -1, dtype=np.int64), "store": np.full(size, -1, dtype=np.int64)}
        for kind, index, program in hits:
            row, col = index // width - first, index % width
            keep = (row % step == 0) & (col % step == 0)
            r, c = row[keep] // step, col[keep] // step
            for cells in [maps["load"], maps["store"]] if kind == "atomic" else [maps[kind]]:  # an atomic does both
                fresh = cells[r, c] < 0
                cells[r[fresh], c[fresh]] = program
        rows = -(-count // width)
        out.append(Touched(name, tuple(shape), maps["load"], maps["store"], first, step, rows))
    return out
