"""What a kernel's memory accesses, traced under the CPU interpreter (kbench.capture.access), say per source line:
bytes moved, masked lanes, the address stride between neighbouring lanes and the bytes used per 32-byte sector it
implies, reuse of the same addresses across programs, and accesses out of bounds. All of it is predicted on a CPU:
which lanes form a warp is the compiler's choice; here 32 consecutive lanes along the pointer tensor's last axis
(the one Triton lays fastest) stand for one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SECTOR = 32  # bytes: the unit DRAM and L2 move
WARP = 32


@dataclass(frozen=True)
class SiteFacts:
    """One load or store site (a source line) of a kernel, over every program that ran it."""

    kind: str
    site: str
    function: str
    calls: int
    programs: int
    lanes: int
    active: int
    bytes: int  # active lanes x element size
    stride_bytes: int | None  # the commonest address step between neighbouring active lanes (None: no such pair)
    bytes_per_sector: float | None  # bytes used of each 32-byte sector a warp's lanes touch (32: all of it)
    reuse: float | None  # active element accesses over distinct addresses, across programs (1: each once)
    out_of_bounds: int  # active lanes outside every allocation
    first_oob_program: tuple[int, int, int] | None

    @property
    def masked_pct(self) -> float:
        return 100.0 * (1 - self.active / self.lanes) if self.lanes else 0.0


def _strides(addresses: Any, mask: Any) -> Any:
    if addresses.ndim == 0 or addresses.shape[-1] < 2:
        return np.empty(0, dtype=np.int64)
    step = addresses[..., 1:] - addresses[..., :-1]
    both = mask[..., 1:] & mask[..., :-1]
    return step[both]


def _sectors(addresses: Any, mask: Any, elem: int) -> tuple[int, int]:
    """(bytes the active lanes move, sectors they touch), a warp's 32 lanes at a time: the distinct (warp, sector)
    pairs of the first and last byte of each active lane."""
    flat, on = addresses.reshape(-1), mask.reshape(-1)
    warp = (np.arange(flat.size) // WARP)[on]
    a = flat[on]
    if a.size == 0:
        return 0, 0
    pairs = np.concatenate([np.stack([warp, a // SECTOR]), np.stack([warp, (a + elem - 1) // SECTOR])], axis=1)
    return int(a.size) * elem, int(np.unique(pairs, axis=1).shape[1])


def sites(accesses: Sequence[Any]) -> list[SiteFacts]:
    """Per (kind, site), in the order the sites first ran."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for a in accesses:
        groups.setdefault((a.kind, a.site), []).append(a)
    out = []
    for (kind, site), calls in groups.items():
        lanes = sum(int(c.mask.size) for c in calls)
        active = sum(int(c.mask.sum()) for c in calls)
        steps = np.concatenate([_strides(c.addresses, c.mask) for c in calls])
        values, counts = np.unique(steps, return_counts=True) if steps.size else (np.empty(0), np.empty(0))
        moved = touched = 0
        for c in calls:
            m, t = _sectors(c.addresses, c.mask, c.elem_bytes)
            moved, touched = moved + m, touched + t
        everything = np.concatenate([c.addresses[c.mask] for c in calls]) if active else np.empty(0, dtype=np.int64)
        distinct = int(np.unique(everything).size)
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
                reuse=active / distinct if distinct else None,
                out_of_bounds=sum(c.out_of_bounds for c in calls),
                first_oob_program=wild[0].program if wild else None,
            )
        )
    return out


def table(facts: Sequence[SiteFacts], root: str | None = None) -> str:
    """The sites as a markdown table (source paths relative to ``root`` where they lie under it)."""

    def where(site: str) -> str:
        return site.removeprefix(root.rstrip("/") + "/") if root and site.startswith(root) else site

    def num(v: float | None, digits: int = 1) -> str:
        return "n/a" if v is None else f"{v:.{digits}f}"

    lines = [
        "| site | kind | programs | bytes | masked lanes % | lane stride (B) | bytes used / 32-B sector | reuse "
        "| out of bounds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in facts:
        stride = "n/a" if f.stride_bytes is None else str(f.stride_bytes)
        lines.append(
            f"| {where(f.site)} ({f.function}) | {f.kind} | {f.programs} | {f.bytes} | {f.masked_pct:.1f} | {stride} | "
            f"{num(f.bytes_per_sector)} | {num(f.reuse, 2)} | {f.out_of_bounds} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Touched:
    """Which program first read and first wrote each element of one tensor (-1: none), in the tensor's shape."""

    name: str
    shape: tuple[int, ...]
    read: Any
    written: Any


def touched(accesses: Sequence[Any], tensors: Sequence[tuple[str, int, int, tuple[int, ...]]]) -> list[Touched]:
    """Per tensor (name, data address, element size, shape): the first program (its index in the order programs
    ran) to read and to write each element."""
    order: dict[tuple[int, int, int], int] = {}
    for a in accesses:
        order.setdefault(a.program, len(order))
    out = []
    for name, start, elem, shape in tensors:
        count = int(np.prod(shape)) if shape else 1
        maps = {"load": np.full(count, -1, dtype=np.int64), "store": np.full(count, -1, dtype=np.int64)}
        for a in accesses:
            lanes = a.addresses[a.mask]
            inside = lanes[(lanes >= start) & (lanes < start + count * elem)]
            if inside.size == 0:
                continue
            index = (inside - start) // elem
            seen = maps[a.kind]
            fresh = index[seen[index] < 0]
            seen[fresh] = order[a.program]
        out.append(Touched(name, tuple(shape), maps["load"].reshape(shape), maps["store"].reshape(shape)))
    return out
