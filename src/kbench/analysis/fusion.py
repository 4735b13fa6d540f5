"""Inter-stage data flow and what fusing stages would save. Pure.

Each stage's record (``tiling/<stage>.json`` ``dataflow``, from capture.dataflow) lists the workspace tensors it
touched: bytes, read or written, the plan's output or not. Consecutive stages that share tensors are a fusion
candidate: apart, each moves every tensor it touches; fused, each distinct tensor moves once, and an intermediate
(written by one stage of the group, read by a later one, used by no stage outside it and not the plan's output)
does not move at all, except partial results a later stage sums (reading over twice what it writes, under a FLOP per
byte): the CTAs of a fused kernel still exchange those through memory, so their writer saves nothing on them. A
memory-bound stage of the group saves the share of its time that its saved bytes are (a re-read of what an earlier
stage of the group touched, or an intermediate), at most down to its remaining bytes at the practical bandwidth; a
compute-bound stage saves nothing (its time does not follow its bytes), so a GEMM and its elementwise epilogue are
credited with the epilogue's saving only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kbench.analysis import bottleneck as b
from kbench.analysis.catalogue.evidence import size_words as _size
from kbench.analysis.opportunities import Opportunity
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures

REDUCED = 2.0  # a stage reading over this many times the bytes it writes reduces (a softmax's fp32 -> bf16: 2) ...
ACCUMULATES = (
    1.0  # ... where it adds them up (under this many FLOPs per byte), not a contraction (P.V) fusing keeps on chip
)


@dataclass(frozen=True)
class Use:
    tensor: str
    bytes: float
    read: bool
    written: bool
    output: bool


def uses(record: dict[str, Any] | None) -> list[Use] | None:
    """A stage's tensor uses from its tiling record; None where the data flow was not recorded."""
    flow = (record or {}).get("dataflow")
    if not flow:
        return None
    return [
        Use(t["name"], float(t["bytes"]), bool(t["read"]), bool(t["written"]), bool(t.get("output")))
        for t in flow["tensors"]
    ]


@dataclass(frozen=True)
class Group:
    """Consecutive stages that share tensors, and the bytes they move apart and fused."""

    stages: list[StageFigures]
    apart: float
    fused: float
    reread: dict[str, int]  # tensor -> stages of the group that touch it (more than one)
    intermediates: list[str]
    # intermediates a later stage reduces (it reads over REDUCED times what it writes in all): partial results of CTAs
    # (split-K, split-KV) that a fused kernel's CTAs still exchange through memory, so their writer keeps writing them
    reduced: list[str]

    @property
    def saved(self) -> float:
        return self.apart - self.fused


def _runs(figs: Sequence[StageFigures], flows: dict[str, list[Use]]) -> list[list[StageFigures]]:
    """Maximal runs of consecutive stages with a recorded data flow, each sharing a tensor with the stages before it
    in the run, holding at least one memory-bound stage (the only kind fusing makes faster)."""
    runs: list[list[StageFigures]] = []
    current: list[StageFigures] = []
    for f in figs:
        if f.name not in flows:
            runs.append(current)
            current = []
            continue
        seen = {u.tensor for g in current for u in flows[g.name]}
        if current and not any(u.tensor in seen for u in flows[f.name]):
            runs.append(current)
            current = []
        current.append(f)
    runs.append(current)
    return [r for r in runs if len(r) > 1 and any(f.bottleneck == "Memory" for f in r)]


def _groups(figs: Sequence[StageFigures], flows: dict[str, list[Use]]) -> list[Group]:
    out = []
    for run in _runs(figs, flows):
        names = {f.name for f in run}
        inside = [u for f in run for u in flows[f.name]]
        outside = {u.tensor for f in figs if f.name not in names for u in flows.get(f.name, [])}
        size = {u.tensor: max(v.bytes for v in inside if v.tensor == u.tensor) for u in inside}
        touched = {t: sum(1 for f in run if any(u.tensor == t for u in flows[f.name])) for t in size}
        intermediates = []
        for t in size:
            writers = [i for i, f in enumerate(run) if any(u.tensor == t and u.written for u in flows[f.name])]
            readers = [i for i, f in enumerate(run) if any(u.tensor == t and u.read for u in flows[f.name])]
            output = any(u.tensor == t and u.output for u in inside)
            if writers and any(r > min(writers) for r in readers) and not output and t not in outside:
                intermediates.append(t)
        writes = {f.name: sum(u.bytes for u in flows[f.name] if u.written) for f in run}
        adds = [f for f in run if f.intensity is not None and f.intensity < ACCUMULATES]  # sums, not contractions
        reduced = [
            t for t in intermediates
            if any(u.tensor == t and u.read and u.bytes > REDUCED * writes[f.name] for f in adds for u in flows[f.name])
        ]  # fmt: skip
        out.append(
            Group(
                stages=run,
                apart=sum(u.bytes for u in inside),
                fused=sum(v for t, v in size.items() if t not in intermediates),
                reread={t: n for t, n in touched.items() if n > 1},
                intermediates=intermediates,
                reduced=reduced,
            )
        )
    return out


def _stage_saving(f: StageFigures, flows: dict[str, list[Use]], g: Group, roof: Ceilings | None) -> float:
    """The microseconds stage ``f`` of group ``g`` would save fused: nothing unless memory-bound; else its time's
    share of the bytes it would no longer move, at most down to the rest of its bytes at the practical bandwidth.
    A stage that reduces partial results (``g.reduced``) saves only its time beyond its bytes (the model's) at the
    practical bandwidth (its launch and tail): fused, the last CTA of each block still reads the partials and writes
    the result (issue 52: mla_decode v9 -> v10, est. 1.6% against 2.3% realized; priced as the partials' reads:
    7.3%)"""
    if f.bottleneck != "Memory":
        return 0.0
    before = {u.tensor for h in g.stages[: g.stages.index(f)] for u in flows[h.name]}
    mine = flows[f.name]
    moved = sum(u.bytes for u in mine)
    if any(u.tensor in g.reduced and u.read for u in mine):  # its bytes: the model's (the record's are whole buffers)
        return max(0.0, f.duration_us - (f.dram_bytes or moved) / (roof.gbps * 1e3)) if roof else 0.0
    kept = {u.tensor for u in mine if u.written and u.tensor in g.reduced}  # still written for the other CTAs
    gone = sum(
        u.bytes for u in mine
        if (u.tensor in g.intermediates and u.tensor not in kept) or (u.tensor in before and not u.written)
    )  # fmt: skip
    if not moved or not gone:
        return 0.0
    floor = (moved - gone) / (roof.gbps * 1e3) if roof else 0.0
    return max(0.0, min(f.duration_us * gone / moved, f.duration_us - floor))


def fusion(
    figs: Sequence[StageFigures], tiling: dict[str, dict[str, Any]], total_us: float, practical: dict[str, Ceilings]
) -> Opportunity | None:
    """The fusion that saves most time, as a share of ``total_us`` (each memory-bound stage's saving, see the module
    note); None when no group would move FUSION_MIN_SAVED fewer bytes or save any time."""
    flows = {f.name: u for f in figs if (u := uses(tiling.get(f.name))) is not None}
    best: tuple[float, Group] | None = None
    for g in _groups(figs, flows):
        if not g.apart or g.saved < b.FUSION_MIN_SAVED * g.apart:
            continue
        saved = sum(_stage_saving(f, flows, g, practical.get(f.precision)) for f in g.stages)
        if saved > 0 and (best is None or saved > best[0]):
            best = (saved, g)
    if best is None:
        return None
    saved, g = best
    names = ", ".join(f.name for f in g.stages)
    uses_of = {t: [u for f in g.stages for u in flows[f.name] if u.tensor == t] for t in g.reread}
    why = []
    for t, n in g.reread.items():
        if t in g.intermediates:
            continue
        size = _size(max(u.bytes for u in uses_of[t]))
        written = any(u.written for u in uses_of[t])
        why.append(f"{t} ({size}) {'goes from one to the next through DRAM' if written else f'is read by {n} of them'}")
    if g.intermediates:
        why.append(f"{', '.join(g.intermediates)} only pass{'es' if len(g.intermediates) == 1 else ''} between them")
    if g.reduced:
        why.append(f"{', '.join(g.reduced)}: partial results the next reduces, which the CTAs of one kernel would "
                   "still exchange through memory (the last CTA of each block merging them): only the reducing "
                   "stage's launch and tail are saved")  # fmt: skip
    return Opportunity(
        name=f"Fuse stages {names}: {'; '.join(why)}",
        gain_pct=100.0 * saved / total_us,
        metric=f"{g.stages[0].name}..{g.stages[-1].name}.bytes_apart_over_fused",
        value=f"{g.apart / g.fused:.2f}x",
        change=f"one kernel for {names} that reads each input once and keeps "
        f"{', '.join(g.intermediates) or 'what passes between them'} on chip: {_size(g.apart)} -> {_size(g.fused)} "
        "moved",
        named=True,
        formula="100 * saved_us / total_us",
        inputs={"saved_us": saved, "total_us": total_us},
    )
