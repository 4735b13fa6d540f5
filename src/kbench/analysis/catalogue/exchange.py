"""The exchange family: an intermediate two kernels of one stage pass through DRAM (one writes it, a later one reads
it), from the stage's data flow recorded at capture time (kbench.capture.dataflow; tiling/<stage>.json
``dataflow``), the bytes bounded by what each kernel was measured to move (ncu's DRAM reads and writes; PM
sampling's DRAM% x time, their sum). Fused, or kept on chip, those bytes never reach DRAM: the saving is the
exchanged bytes (written + read) at the practical DRAM bandwidth, within the stage's distance to its roof. Pure.

Launch by launch (``launches``): a tensor a launch wrote and a later launch read, unchanged, before any launch wrote
it again; a write of the plan's output stays (only its reads are saved). Recorded before launches were (the stage's
totals only): a tensor the stage wrote that is not the plan's output, in a stage of two kernels or more, taken as
written once and read once (the item says so). A kernel the plan does not declare is left to kernels.undeclared,
which prices removing it whole. Between stages: kbench.analysis.fusion.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import Any

from kbench.analysis.catalogue.evidence import Evidence, Opportunity
from kbench.analysis.catalogue.evidence import size_words as _size
from kbench.analysis.catalogue.kernels import UNDECLARED_PCT
from kbench.analysis.kernels import StageKernel

MIN_SHARE = 0.05  # exchanged bytes (written + read) of the stage's bytes that make an item: a split's partials do not
FORMULA = "100 * max(0, min(exchanged_bytes / (practical_gbps * 1000), gap_us)) / total_us"
LAUNCHES = "recorded launch by launch at capture"
TOTALS = "the stage's recorded totals: a tensor it writes, not its output"


@dataclass(frozen=True)
class Exchange:
    """One intermediate: the kernel that writes it, the kernels that then read it, and the bytes each moves of it."""

    tensor: str
    writer: str
    written: float  # bytes the writer wrote of it (the data-flow record)
    readers: tuple[tuple[str, float], ...]  # (kernel, bytes it read of it)
    output: bool  # the plan's output: its write stays
    source: str  # LAUNCHES or TOTALS


def exchanges(flow: dict[str, Any] | None) -> list[Exchange]:
    """The intermediates a stage's recorded data flow shows passing between its launches (see the module note)."""
    if not flow:
        return []
    outputs = {t["name"] for t in flow.get("tensors", []) if t.get("output")}
    launches = flow.get("launches")
    if launches is None:
        if (flow.get("kernels") or 0) < 2:
            return []
        return [
            Exchange(t["name"], "", float(t["bytes"]), (("", float(t["bytes"])),), False, TOTALS)
            for t in flow.get("tensors", [])
            if t["written"] and not t.get("output")
        ]
    # per tensor, the launches that touch it in order: each write is followed only up to the next write of it
    # (linear in the record: it is read back from a run folder, and may be anything)
    touching: dict[str, list[int]] = {}
    for i, launch in enumerate(launches):
        for name in dict.fromkeys(t["name"] for t in (*launch["reads"], *launch["writes"])):
            touching.setdefault(name, []).append(i)
    rewrites = [{t["name"] for t in launch["writes"]} for launch in launches]
    reads: list[dict[str, list[float]]] = [{} for _ in launches]  # per launch, the bytes of each read of a tensor
    for i, launch in enumerate(launches):
        for r in launch["reads"]:
            reads[i].setdefault(r["name"], []).append(float(r["bytes"]))
    merged: dict[tuple[str, str, tuple[str, ...]], Exchange] = {}
    for i, launch in enumerate(launches):
        wrote: dict[str, float] = {}
        for w in launch["writes"]:
            wrote[w["name"]] = wrote.get(w["name"], 0.0) + float(w["bytes"])
        for name, nbytes in wrote.items():
            readers: list[tuple[str, float]] = []
            after = touching[name]
            for n in range(bisect_right(after, i), len(after)):  # no slice: a copy per write is quadratic again
                if name in rewrites[after[n]]:
                    break  # written again: what it held before is no longer read
                readers += [(launches[after[n]]["kernel"], b) for b in reads[after[n]].get(name, [])]
            if not readers:
                continue
            key = (name, launch["kernel"], tuple(k for k, _ in readers))
            was = merged.get(key)
            merged[key] = Exchange(
                name,
                launch["kernel"],
                nbytes + (was.written if was else 0.0),
                tuple(
                    (k, b + (was.readers[j][1] if was else 0.0)) for j, (k, b) in enumerate(readers)
                ),  # a repeated pair (a loop of launches): its bytes summed
                name in outputs,
                LAUNCHES,
            )
    return list(merged.values())


def _kernel(e: Evidence, name: str) -> StageKernel | None:
    """The measured kernel a recorded launch ran: a Triton kernel by its name; a PyTorch operator by the op the
    profiler says launched it (CUPTI names the op the caller called, ``aten::to`` for the ``aten::_to_copy`` recorded),
    else the one kernel of the stage that no recorded Triton launch names."""
    if e.kernels is None or not name:
        return None
    ks = e.kernels.kernels
    found = next((k for k in ks if name in (k.name, k.short)), None)
    if found is not None or not name.startswith("aten::"):
        return found
    by_op = [k for k in ks if name in [o.strip() for o in (k.op or "").split(">")]]
    triton = {launch["kernel"] for launch in (e.flow or {}).get("launches") or [] if "::" not in launch["kernel"]}
    others = by_op or [k for k in ks if k.name not in triton and k.short not in triton]
    return others[0] if len(others) == 1 else None


def _bound(recorded: float, measured: float | None) -> float:
    return recorded if measured is None else min(recorded, measured)


def dram_bytes(e: Evidence, x: Exchange) -> tuple[float, bool]:
    """The bytes of ``x`` that go through DRAM and fusing would save: its write (unless the plan's output) and its
    reads, each at most what its kernel was measured to write or read (ncu), or to move (sampled); and whether any
    kernel's measurement bounded them."""
    w = _kernel(e, x.writer)
    w_measured = None if w is None else (w.dram_write_bytes if w.dram_write_bytes is not None else w.dram_bytes)
    saved = 0.0 if x.output else _bound(x.written, w_measured)
    bounded = w_measured is not None and not x.output
    for name, nbytes in x.readers:
        r = _kernel(e, name)
        r_measured = None if r is None else (r.dram_read_bytes if r.dram_read_bytes is not None else r.dram_bytes)
        saved += _bound(nbytes, r_measured)
        bounded = bounded or r_measured is not None
    return saved, bounded


def _stage_bytes(e: Evidence, flow: dict[str, Any]) -> float:
    """The stage's bytes the exchange is weighed against: measured (its kernels' bytes, or ncu's for the stage), else
    what its launches were recorded to read and write, else its totals, else the plan's model."""
    ks = e.kernels.kernels if e.kernels is not None else []
    if ks and all(k.dram_bytes is not None for k in ks):
        return sum(k.dram_bytes or 0.0 for k in ks)
    if e.moved_bytes:
        return e.moved_bytes
    launched = [
        float(t["bytes"]) for launch in flow.get("launches") or [] for t in (*launch["reads"], *launch["writes"])
    ]
    return sum(launched) or sum(float(t["bytes"]) for t in flow.get("tensors", [])) or (e.stage.dram_bytes or 0.0)


def _undeclared(e: Evidence, name: str) -> bool:
    """A kernel kernels.undeclared prices whole (not the plan's, UNDECLARED_PCT of the stage or more)."""
    k = _kernel(e, name)
    return k is not None and k.declared is False and (k.share_pct or 0.0) >= UNDECLARED_PCT


@dataclass(frozen=True)
class Found:
    """The stage's largest exchange, the DRAM bytes fusing would save, and against what."""

    x: Exchange
    saved: float  # bytes
    bounded: bool  # by the kernels' measured bytes
    total: float  # the stage's bytes (_stage_bytes)
    others: int  # further intermediates found


def largest(e: Evidence) -> Found | None:
    """The intermediate that moves the most DRAM bytes between two kernels of the stage, where it is MIN_SHARE of the
    stage's bytes or more (None otherwise), kernels the plan does not declare left to kernels.undeclared."""
    if e.flow is None:
        return None
    found = [
        Found(x, *dram_bytes(e, x), total=_stage_bytes(e, e.flow), others=0)
        for x in exchanges(e.flow)
        if not any(_undeclared(e, k) for k in (x.writer, *(r for r, _ in x.readers)))
    ]
    if not found:
        return None
    top = max(found, key=lambda f: f.saved)
    return replace(top, others=len(found) - 1) if top.total and top.saved >= MIN_SHARE * top.total else None


def exchanged_bytes(e: Evidence) -> float:
    """The DRAM bytes the stage's exchange item names (0: none): memory.excess_traffic leaves them to it."""
    f = largest(e)
    return f.saved if f is not None and e.practical is not None else 0.0


def exchanged(e: Evidence) -> Opportunity | None:
    """The stage's largest exchange (``largest``): fusing its kernels, or keeping it on chip, saves its bytes at the
    practical bandwidth."""
    f = largest(e)
    if f is None or e.practical is None:
        return None
    x, saved, bounded, total = f.x, f.saved, f.bounded, f.total
    gbps = e.practical.gbps
    readers = ", ".join(sorted({r for r, _ in x.readers}))
    measured = (
        "bounded by the kernels' measured DRAM bytes" if bounded else "its size: no DRAM bytes measured per kernel"
    )
    more = f"; {f.others} more intermediate(s)" if f.others else ""
    share = f"{100.0 * saved / total:.0f}% of the stage's bytes{more}"
    if x.source == TOTALS:
        names = ", ".join(k.short for k in e.kernels.kernels) if e.kernels is not None else ""
        pair = f"the kernels of {e.name}{f' ({names})' if names else ''}"
        name = (
            f"{pair[0].upper()}{pair[1:]} pass {x.tensor}: {_size(saved)} through DRAM (written and read once, from "
            f"{TOTALS}; {measured}), {share}"
        )
    else:
        pair = f"{x.writer} and {readers}"
        name = (
            f"Kernels {pair} of {e.name} exchange {_size(saved)} through DRAM ({x.writer} writes {x.tensor}, "
            f"{readers} read{'s' if ',' not in readers else ''} it, {LAUNCHES}; {measured}), {share}"
        )
    return Opportunity(
        name=name,
        gain_pct=e.gain(saved / (gbps * 1e3)),
        metric=f"{e.name}.exchanged_bytes_pct",
        value=f"{100.0 * saved / total:.1f}%",
        change=f"fuse {pair} into one kernel that keeps {x.tensor} on chip: each program makes a tile of it and "
        "consumes it before the next (an online softmax over attention scores, an epilogue applied to the GEMM's "
        f"accumulator, partials reduced in shared memory); where one kernel cannot hold it, make {x.tensor} small "
        "enough to stay in L2 (a narrower type, fewer splits)",
        named=True,
        stage=e.name,
        kernel=x.writer or None,
        formula=FORMULA,
        inputs={**e.gain_inputs(exchanged_bytes=saved), "practical_gbps": gbps},
    )
