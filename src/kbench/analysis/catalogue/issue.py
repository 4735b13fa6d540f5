"""The issue roof (the Instruction Roofline Model, Ding & Williams 2019): the warp instructions a stage's kernels
issued against what its SMs can issue in the same time (warp instructions per clock per SM, conf/devices.json, x the
SMs x the measured SM clock x the duration), a ceiling beside compute and memory; and the item when it is the
nearest of the three. The issued count is ncu's (counter modes) or PM sampling's (event mode with cupti-python:
kbench.analysis.sampling.evidence); a compiled kernel's instruction mix is static (each instruction once as written,
no loop trip counts), so without either there is no issue roof. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from kbench.analysis import bottleneck as b
from kbench.analysis.catalogue.evidence import Evidence, Opportunity, finding
from kbench.analysis.catalogue.stalls import PIPE_WORDS
from kbench.analysis.stages import StageFigures

# the fewest warp instructions a modelled work needs (the gain model): one FP32 FMA per lane does 2 FLOPs, one
# 16-byte load or store per lane moves 16 bytes; tensor-core FLOPs take next to no issue slots
FLOPS_PER_WARP_INSTRUCTION = 2 * 32
BYTES_PER_WARP_INSTRUCTION = 16 * 32


@dataclass(frozen=True)
class IssueRoof:
    issued: float  # warp instructions issued
    capacity: float  # warp instructions the SMs could issue in the same time
    counter: str  # the metric that counted ``issued``
    rate: int  # warp instructions per clock per SM

    @property
    def pct(self) -> float:
        return 100.0 * self.issued / self.capacity


def roof(e: Evidence) -> IssueRoof | None:
    """The stage against its issue roof; None where the issued count, the SM cycles or the device's rate is missing."""
    rate = e.limits.issue_per_clock if e.limits else None
    if e.issued is None or not e.sm_cycles or rate is None:
        return None
    return IssueRoof(e.issued, rate * e.sm_cycles, e.issued_counter or "n/a", rate)


def roof_fractions(e: Evidence) -> tuple[float, float]:
    """How full the compute and memory roofs are (%): the tensor pipe and DRAM counters, or the modelled work's rate
    on the practical roofs, whichever is higher (not sm__throughput, which counts the issue slots themselves)."""
    s, c = e.stage, e.practical
    compute = [s.tc_pct or 0.0]
    memory = [s.dram_pct or 0.0]
    if c is not None and s.flops:
        compute.append(100.0 * s.flops / (e.us * 1e-6) / (c.tflops * 1e12))
    if c is not None and s.dram_bytes:
        memory.append(100.0 * s.dram_bytes / (e.us * 1e-6) / (c.gbps * 1e9))
    return max(compute), max(memory)


def needed(e: Evidence) -> float | None:
    """The fewest warp instructions the modelled work needs: its CUDA-core FLOPs as FMAs and its DRAM bytes as
    16-byte accesses, 32 lanes each (tensor-core work counted as none); None without a FLOP/byte model."""
    s = e.stage
    if s.flops is None or s.dram_bytes is None:
        return None
    tensor = bool(e.tensor_cores) and s.precision in b.TENSOR_PRECISIONS
    return (0.0 if tensor else s.flops / FLOPS_PER_WARP_INSTRUCTION) + s.dram_bytes / BYTES_PER_WARP_INSTRUCTION


def place(f: StageFigures, e: Evidence) -> None:
    """The stage's issue-roof columns (the Roofline section): % of the roof, and modelled FLOPs per issued thread
    instruction."""
    r = roof(e)
    if r is None:
        return
    f.issue_roof_pct, f.issued = r.pct, r.issued
    f.flops_per_issue = f.flops / r.issued / 32 if f.flops is not None and r.issued else None


def issue_bound(e: Evidence) -> Opportunity | None:
    """Issued instructions fill the issue roof more than the modelled work fills compute or memory, and more than any
    pipe is busy (ncu's pipe utilisation, where measured): fewer
    instructions per useful FLOP or byte shorten the stage in proportion (time at the issue roof scales with the
    instructions), down to the fewest the modelled work needs (``needed``: an upper bound of what a rewrite removes),
    never below the practical roof."""
    r = roof(e)
    if r is None or r.pct < b.ISSUE_BOUND_PCT:
        return None
    compute, memory = roof_fractions(e)
    need = needed(e)
    # a pipe busier than the issue slots (the special-function unit, FP64) is a nearer ceiling: that pipe sets the time
    if r.pct <= max(compute, memory, *e.pipes.values()) or need is None:
        return None
    removable = 1.0 - need / r.issued
    if 100.0 * removable < b.REMOVABLE_ISSUE_PCT:
        return None  # the instructions are the work
    s = e.stage
    per = s.flops / r.issued / 32 if s.flops else 0.0
    saved = e.us - max(e.bound_us or 0.0, e.us * need / r.issued)
    sms = f" x {e.sm_count} SMs" if e.sm_count else ""
    at = f"; start at {e.hot_executing[0]}" if e.hot_executing else ""
    busiest = max(e.pipes.items(), key=lambda kv: kv[1], default=None)
    pipe = f"; busiest pipe: {PIPE_WORDS.get(busiest[0], busiest[0])}, {busiest[1]:.0f}% of peak" if busiest else ""
    return finding(
        e,
        f"Issue-bound {e.where}: {r.issued:.3g} warp instructions issued fill {r.pct:.0f}% of the issue roof "
        f"({r.rate} per clock per SM{sms} x the measured SM clock; compute {compute:.0f}%, memory {memory:.0f}%), "
        f"{per:.2f} modelled FLOPs per issued instruction; the modelled work needs at least {need:.3g} (one FMA per "
        f"2 FLOPs, one 16-byte access per 16 bytes, per lane): up to {100.0 * removable:.0f}% are removable{pipe}",
        saved,
        (f"{e.name}.issue_roof_pct", f"{r.pct:.1f}%"),
        f"issue fewer instructions per useful FLOP and byte in {e.name}: vectorize loads and stores (contiguous "
        "offsets, a wider BLOCK per thread), hoist loop-invariant index and address arithmetic out of the loop, "
        "replace integer division and modulo by precomputed indices or shifts, and put dot-shaped work on the tensor "
        f"cores ({'warpgroup_mma' if e.gluon else 'tl.dot'}){at}",
        whole_stage=True,
    )
