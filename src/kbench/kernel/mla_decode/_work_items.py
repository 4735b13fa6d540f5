"""mla_decode v9's work items: each sequence's 64-row cache tiles cut into chunks of at most a bound, and the model
of the makespan the block scheduler's greedy placement gives them on the SMs (one CTA per SM) plus the combine's
traffic, by which the bounds are ranked before the tuner times the best few."""

from __future__ import annotations

import functools
import heapq
import math
from dataclasses import dataclass

# the makespan model's constants, from v7 on the H100 (issue 44): 157.4 us for 64 tiles of 64 rows at one CTA per SM
TILE_US = 2.4  # one 64-row tile of a 64-row block, compute-bound
TILE_BYTES = 64 * 576 * 2  # one tile from DRAM: read once by the row blocks of its chunk, which run together
COPY_GBPS = 3000.0  # the copy ceiling measured on the H100 (bench_mla_decode: 2940-3013 GB/s)
ITEM_US = 4.0  # a CTA's prologue (Q's 72 KB, two tiles in flight) and epilogue, about two tiles' time (estimated)
COMBINE_GBPS = 2500.0  # the combine's partials, written once and read once (v3's combine: 1744-2900 GB/s measured)
COMBINE_US = 3.0  # the combine's launch and tail


@dataclass(frozen=True)
class Cut:
    """Each sequence's tiles cut into chunks of at most ``bound`` tiles: the work items (longest first) and what the
    makespan model says of them."""

    bound: int
    items: list[tuple[int, int, int, int, int, int]]  # sequence, first tile, end tile, slot (-1: direct), first, count
    slots: int
    est_us: float

    @classmethod
    def of(cls, tiles: list[int], bound: int, row_blocks: int, rows: int, d: int, sms: int) -> Cut:
        items: list[tuple[int, int, int, int, int, int]] = []
        slot = 0  # the next free slot: a split sequence's chunks take consecutive ones
        for seq, n in enumerate(tiles):
            parts = math.ceil(n / bound)
            first = slot if parts > 1 else -1
            for k in range(parts):
                items.append((seq, k * n // parts, (k + 1) * n // parts, first + k if parts > 1 else -1, first, parts))
            slot += parts if parts > 1 else 0
        items.sort(key=lambda it: it[1] - it[2])  # longest first
        # a tile's time: its MMAs, or its share of DRAM where the SMs' distinct chunks outrun the copy ceiling
        tile_us = max(TILE_US, TILE_BYTES * sms / row_blocks / (COPY_GBPS * 1e3))
        free = [0.0] * sms  # each SM's finish time under greedy placement, one CTA at a time
        for _, a, z, *_ in items:
            for _ in range(row_blocks):
                heapq.heapreplace(free, free[0] + ITEM_US + tile_us * (z - a))
        combine = COMBINE_US + 2 * 4.0 * slot * rows * d / (COMBINE_GBPS * 1e3) if slot else 0.0
        return cls(bound, items, slot, max(free) + combine)


@functools.lru_cache(maxsize=64)
def ranked_cuts(tiles: tuple[int, ...], row_blocks: int, rows: int, d: int, sms: int) -> list[Cut]:
    """Every distinct cut of sequences of ``tiles`` tiles (the largest bound giving it), the model's best first, all of
    the best one's kind (split or not)."""
    every: dict[tuple[int, ...], Cut] = {}
    for bound in range(max(tiles), 0, -1):  # the largest bound of each distinct cut
        key = tuple(math.ceil(n / bound) for n in tiles)
        if key not in every:
            every[key] = Cut.of(list(tiles), bound, row_blocks, rows, d, sms)
    ranked = sorted(every.values(), key=lambda c: (c.est_us, -c.bound))
    return [c for c in ranked if bool(c.slots) == bool(ranked[0].slots)]
