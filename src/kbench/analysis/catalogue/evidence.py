"""What a mode measured of one stage (``Evidence``), the item a catalogue entry yields (``Opportunity``), and the one
gain rule every entry follows: a share of the plan's time, never beyond the stage's distance to its practical roof.
Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from kbench.analysis import roofline as rl
from kbench.analysis.access_facts import Predicted
from kbench.analysis.devices import SmLimits
from kbench.analysis.kernels import StageKernels
from kbench.analysis.lines import Line, LineModel
from kbench.analysis.ptx import InstructionMix
from kbench.analysis.ptxas import Serialized
from kbench.analysis.stages import StageFigures
from kbench.analysis.ttgir import AtomicOp, DotOp, idle_warps
from kbench.model import Model

ALONE_SHARE = 0.95  # a main kernel holding this share of its stage is named as the stage


# the unit of a trigger's value by its metric (after the stage's name); a value written with % or x carries its own
UNITS: dict[str, str] = {
    **dict.fromkeys(
        ("practical_roof_pct", "busiest_pct", "tensor_feed_cap", "issue_roof_pct", "undeclared_kernel_pct",
         "host_gap_pct", "tail_idle_pct", "mbarrier_wait_share", "sm_busy_pct", "masked_lanes_pct_predicted",
         "dram_pct", "compute_pct", "gpu_idle_pct", "overlap_achieved", "xu_pipe_pct", "exchanged_bytes_pct"),
        "%",
    ),
    "flops_over_model": "x the plan's FLOPs", "repeated_tensor_work": "x the model's tensor FLOPs",
    "dram_bytes_over_model": "x the plan's DRAM bytes", "distinct_bytes_over_model_predicted": "x the plan's bytes",
    "bytes_apart_over_fused": "x the bytes moved fused", "program_work_max_over_mean": "x the mean program's bytes",
    "async_copies": "asynchronous copy instructions", "fp64_instructions": "FP64 instructions executed",
    "warps_per_scheduler": "warps per scheduler", "spilled_registers": "registers spilled", "local_memory_bytes": "B",
    "grid_ctas": "CTAs", "waves": "waves", "launches": "kernel launches per run", "bytes_in_flight_per_sm": "B",
    "global_ld_bytes_per_sector": "B used of each 32-B sector", "global_st_bytes_per_sector": "B used of each 32-B "
    "sector", "global_ld_bytes_per_sector_predicted": "B used of each 32-B sector", "global_st_bytes_per_sector_"
    "predicted": "B used of each 32-B sector", "worst_bytes_per_sector_predicted": "B used of each 32-B sector",
    "global_atomics_executed": "atomics executed", "sites": "load and store lines", "rules_with_speedup": "rules",
}  # fmt: skip
LINE_SHARE = re.compile(r"line_\d+_share")  # the hottest line's share of the samples
GAIN = "100 * max(0, min({saved}, gap_us)) / total_us"  # Evidence.gain as report.json's formula
GLUON_CALL, TRITON_CALL = re.compile(r"\bgl\.\w+\("), re.compile(r"\btl\.\w+\(")  # a line written in either
ENTRY = ("def ", "async def ", "@")  # a function's own line and its decorators: no statement of the kernel executes


def entry(code: str) -> bool:
    """A function's entry line: the samples there are its prologue's, or warps with nothing to run (a
    warp-specialized kernel's warps in no partition), never a statement to change."""
    return code.lstrip().startswith(ENTRY)


class Opportunity(Model):
    name: str
    gain_pct: float
    metric: str
    value: str
    change: str | None = None  # what to change in the kernel (the report's `   change:` line)
    named: bool = False  # the catalogue named the mechanism (or that the stage is done) from this run's data
    stop: bool = False  # the stage is at its practical roof: listed whatever its gain
    rest: bool = False  # the part of the distance to the roof no named mechanism explains
    counted: bool = False  # (the rest) counters measured its stage: said under Top 3, never an item of it
    # no edit of the kernel in its language and structure reaches it (registers, shared memory, what the compiler
    # emits): its change says what would; said under Top 3, not ranked in it (opportunities.rank)
    structural: bool = False
    # where it is: the stage and kernel it is about and, where it names one, the source line that executes
    stage: str | None = None
    kernel: str | None = None
    file: str | None = None  # as report.md quotes it (the file's name)
    line: int | None = None
    code: str | None = None  # the line's text (None where the source was not at hand)
    unit: str | None = None  # the trigger value's unit, where UNITS does not give it (a stall reason's)
    # the gain model: an expression of + - * / min max over ``inputs`` that gives gain_pct (report.json's gain_pct)
    formula: str = ""
    inputs: dict[str, float] = Field(default_factory=dict)

    @property
    def trigger_unit(self) -> str | None:
        """The unit of the trigger's value (None: a word, not a number, or a metric no table names)."""
        if self.unit:
            return self.unit
        suffix = self.metric.split(".", 1)[-1]
        return UNITS.get(suffix) or ("%" if LINE_SHARE.fullmatch(suffix) or self.value.endswith("%") else None)

    def at(self, x: Line | str | None) -> Opportunity:
        """This item placed at a source line: a line of the line model, or a ``file.py:N`` place (an access site)."""
        if isinstance(x, Line):
            return self.model_copy(update={"file": Path(x.file).name, "line": x.line, "code": x.code or None})
        found = re.fullmatch(r"(.*?):(\d+)", x or "")
        if found is None:
            return self
        return self.model_copy(update={"file": Path(found[1]).name, "line": int(found[2])})

    def capped(self, cap: float, formula: str, **inputs: float) -> Opportunity:
        """This item with its gain capped at ``cap`` (``formula`` over ``inputs``)."""
        return self.model_copy(
            update={
                "gain_pct": min(self.gain_pct, cap),
                "formula": f"min({self.formula}, {formula})",
                "inputs": {**self.inputs, **inputs},
            }
        )


@dataclass(frozen=True)
class Evidence:
    """What a mode measured of one stage, for the catalogue (None: this mode did not measure it)."""

    stage: StageFigures
    total_us: float  # the plan's time: every gain is a share of it
    practical: rl.Ceilings | None  # the practical roof of the stage's precision (measured ceilings)
    sm_count: int | None = None
    ctas: int | None = None  # the grid of its (longest) kernel
    ctas_per_sm: float | None = None  # how many of those CTAs one SM holds at once
    ctas_limiter: str | None = None  # what caps them: registers, shared memory, warps, blocks
    launches: int | None = None  # kernels the stage launches per run
    ld_sectors: float | None = None  # 32-byte sectors global loads / stores touched (ncu)
    st_sectors: float | None = None
    ld_use: float | None = None  # bytes of each such sector the instructions used, of 32 (ncu)
    st_use: float | None = None
    registers: float | None = None  # per thread
    warps: int | None = None  # per CTA
    num_stages: int | None = None  # software-pipelining depth the kernel was compiled with (Triton)
    spilled: float | None = None  # the compiler's spill count (Triton)
    spill_bytes: float | None = None  # local-memory traffic counted by ncu
    moved_bytes: float | None = None  # DRAM bytes counted by ncu
    tensor_cores: bool | None = None  # tensor-core work seen (ncu's tensor FLOPs, or mma in the kernel's PTX)
    tensor_paths: dict[str, float] = field(default_factory=dict)  # ncu: tensor FLOPs by operand precision
    instructions: InstructionMix | None = None  # the compiled kernel's PTX by instruction class (static)
    atomics: list[AtomicOp] | None = None  # its tl.atomic_* calls as one program executes them (TTGIR; None: none read)
    dots: list[DotOp] | None = None  # its tl.dot products with their accumulator layouts (TTGIR; None: none read)
    loop_barriers: tuple[str, ...] | None = None  # CTA barriers in its loops, by source line (TTGIR; None: not read)
    wgmma_serialized: Serialized | None = None  # ptxas's advisory that its warpgroup MMAs are serialized (ptxas.txt)
    hgmma_drained: tuple[int, int] | None = None  # (HGMMAs each waited for before the next, HGMMAs) in its SASS
    partition_warps: tuple[int, ...] = ()  # a warp-specialized kernel's partitions' warps, the default's first (TTGIR)
    stalls: dict[str, float] = field(default_factory=dict)  # warp-stall reason -> stalled warps per issue (ncu)
    stall_unit: str = "stalled warps per issued instruction"  # what ``stalls`` counts (PC sampling: samples)
    hot_lines: tuple[str, ...] = ()  # the source lines with the most stall samples (ncu mode)
    lines: LineModel | None = None  # time by source line of the main kernel (measured, or static from its code)
    pipes: dict[str, float] = field(default_factory=dict)  # instruction pipe -> % of its peak (ncu)
    shared_wavefronts: float | None = None  # shared-memory data-pipe wavefronts, and those bank conflicts added (ncu)
    shared_conflicts: float | None = None
    tile: dict[str, object] = field(default_factory=dict)  # its launch configuration by name (BLOCK_M=64, ...)
    # the tuner's decision (tiling ``tuning``: the chosen configuration, the runner-up and how much faster that ran)
    tuning: dict[str, Any] | None = None
    language: str | None = None  # what the kernel is written in, as its launch record says ("triton", "gluon")
    shared_bytes: float | None = None  # shared memory a CTA holds (the compiled kernel)
    tail_idle_pct: float | None = None  # SM time idle after each SM's last CTA, of SMs x span (intra timeline)
    cta_imbalance: float | None = None  # slowest CTA over the mean CTA (intra timeline)
    limits: SmLimits | None = None  # what an SM holds and feeds per clock (conf/devices.json)
    dram_latency_ns: float | None = None  # one dependent DRAM load, measured on the device (conf/devices.json)
    dram_peak_gbps: float | None = None  # the datasheet DRAM bandwidth DRAM% is a share of (conf/devices.json)
    arch: str | None = None  # the device's architecture, as conf/devices.json names it ("Hopper (sm_90)")
    atomic_serial_ns: float | None = None  # one atomic to an address others also update, measured (conf/devices.json)
    ieee_division_xu: float | None = None  # the XU time of one IEEE fp32 division over one MUFU's, measured (same)
    practical_by_precision: dict[str, rl.Ceilings] = field(default_factory=dict)  # every precision's practical roof
    predicted: Predicted | None = None  # its loads and stores traced under the CPU interpreter (an access run)
    kernels: StageKernels | None = None  # what the GPU ran inside the stage (CUPTI, nsys, ncu), largest first
    flow: dict[str, Any] | None = None  # its data flow recorded at capture (tiling ``dataflow``): per launch, or totals
    kernel: str | None = None  # the kernel the launch facts above describe (the stage's main kernel)
    share: float = 1.0  # that kernel's share of the stage's GPU time (1: the only kernel, or not measured)
    issued: float | None = None  # warp instructions its kernels issued (ncu), and the metric that counted them
    issued_counter: str | None = None
    sm_cycles: float | None = None  # SM cycles elapsed over its kernels: SMs x measured SM clock x duration (ncu)
    longest_programs: tuple[str, ...] = ()  # its longest CTAs, as measured ("CTA 12: 41.2 us"; intra timeline)
    sm_busy_pct: float | None = None  # the average SM's active cycles over the busiest SM's, % (ncu, main kernel)
    theoretical_occupancy_pct: float | None = None  # what the launch limits allow, beside the achieved occ_pct (ncu)

    @property
    def name(self) -> str:
        return self.stage.name

    @property
    def idle_warps(self) -> int | None:
        """Warps of a warp-specialized kernel in no partition (they wait the run out); None without partitions."""
        return idle_warps(self.partition_warps, self.warps)

    @property
    def where(self) -> str:
        """The stage, and in a stage of several kernels the kernel the facts describe (items name it), unless it holds
        nearly all of the stage's time (a memset beside it is not worth a word)."""
        if self.kernel and self.kernels is not None and len(self.kernels.kernels) > 1 and self.share < ALONE_SHARE:
            return f"{self.name} (kernel {self.kernel}, {100.0 * self.share:.0f}% of the stage)"
        return self.name

    @property
    def gluon(self) -> bool:
        """A Gluon kernel writes by hand what Triton's compiler decides for a Triton one (its layouts, its pipeline of
        mbarriers and TMA copies, its warp specialization), so its changes name those levers and its own block
        constexprs, never Triton's tuning knobs (num_stages, autotune configs) or tl.* calls. Its launch record says
        so; a record made before it did (no ``language``) is read from the kernel's source lines: gl.* calls, no
        tl.* call."""
        if self.language is not None or self.lines is None:
            return self.language == "gluon"
        code = [x.code for x in self.lines.lines]
        return any(GLUON_CALL.search(c) for c in code) and not any(TRITON_CALL.search(c) for c in code)

    @property
    def larger_blocks(self) -> str:
        """A Gluon kernel's block sizes as its own constexprs name them: ``larger block constexprs (now BLOCK_M=64,
        BLOCK_N=64)``."""
        own = ", ".join(f"{k}={v}" for k, v in self.tile.items() if k.startswith("BLOCK"))
        return f"larger block constexprs (now {own})" if own else "larger block constexprs"

    @property
    def waves(self) -> float | None:
        """CTAs over the slots the SMs hold at once (SMs x resident CTAs per SM)."""
        if not self.ctas or not self.sm_count:
            return None
        return self.ctas / (self.sm_count * (self.ctas_per_sm or 1.0))

    @property
    def hot_executing(self) -> tuple[str, ...]:
        """The hottest source lines but a function's own line (``def``: the entry, where no statement executes)."""
        return tuple(h for h in self.hot_lines if not entry(h.split("`", 2)[1] if h.count("`") >= 2 else ""))

    @property
    def kernel_name(self) -> str | None:
        """The kernel its facts describe: the main kernel, else the one its line model reads."""
        main = self.kernels.main if self.kernels is not None else None
        return self.kernel or (self.lines.kernel if self.lines else None) or (main.name if main else None)

    @property
    def kernel_us(self) -> float:
        """The time of the kernel the facts describe: the stage's time weighed by its share."""
        return self.us * self.share

    @property
    def config(self) -> str:
        """Its launch configuration, as the report shows it ("" when not known)."""
        return ", ".join(f"{k}={v}" for k, v in self.tile.items())

    @property
    def us(self) -> float:
        return self.stage.duration_us

    @property
    def bound_us(self) -> float | None:
        """The stage's time on its practical roof, with the plan's FLOP/byte model."""
        s = self.stage
        if self.practical is None or s.flops is None or s.dram_bytes is None:
            return None
        return rl.bound_us(self.practical, s.flops, s.dram_bytes)

    @property
    def busiest_pct(self) -> float | None:
        """Its busiest unit's share of peak (counters: tensor/SM or DRAM), where no roofline places it."""
        return max((v for v in (self.stage.compute_pct, self.stage.memory_pct) if v is not None), default=None)

    @property
    def gap_us(self) -> float:
        """The stage's distance to its practical roof; without a roof, its busiest unit's headroom (counters), else
        its whole time."""
        bound = self.bound_us
        if bound is not None:
            return max(0.0, self.us - bound)
        busiest = self.busiest_pct
        return self.us * max(0.0, 1.0 - busiest / 100.0) if busiest is not None else self.us

    def gain(self, saved_us: float) -> float:
        """``saved_us`` of this stage as a share of the plan, never beyond its distance to the practical roof."""
        return 100.0 * max(0.0, min(saved_us, self.gap_us)) / self.total_us

    def gain_inputs(self, **saved: float) -> dict[str, float]:
        """``gain``'s operands: the stage's distance to its roof, the plan's time, and what ``saved`` names."""
        return {**saved, "gap_us": self.gap_us, "total_us": self.total_us}

    @property
    def resident_ctas(self) -> int | None:
        """CTAs one SM holds at once: the grid spread over the SMs, at most what the occupancy limits allow."""
        if not self.ctas or not self.sm_count:
            return None
        resident = -(-self.ctas // self.sm_count)
        return min(resident, int(self.ctas_per_sm)) if self.ctas_per_sm else resident

    def executed(self, per_thread: int) -> float | None:
        """Instructions the kernel executes in all, ``per_thread`` of them (its static count) in every thread of every
        CTA: a floor where a loop repeats them."""
        return float(per_thread * self.warps * 32 * self.ctas) if self.warps and self.ctas else None

    @property
    def memory_limited(self) -> bool:
        """DRAM sets the stage's roof (the plan's model), or counters class it Memory."""
        return self.memory_limited_doing(1.0)

    def memory_limited_doing(self, work: float) -> bool:
        """DRAM sets the roof of the stage doing ``work`` times the plan's FLOPs (the work that executes: a stage the
        model calls memory-bound can be compute-bound in what it runs), or counters class it Memory."""
        c, s = self.practical, self.stage
        if c is not None and s.flops is not None and s.dram_bytes:
            return rl.limiting_roof(c, s.flops * work, s.dram_bytes) == "memory"
        return s.bottleneck == "Memory"


def finding(
    e: Evidence,
    name: str,
    saved_us: float,
    trigger: tuple[str, str],
    change: str,
    stop: bool = False,
    structural: bool = False,
    whole_stage: bool = False,
    at: Line | str | None = None,
) -> Opportunity:
    """A mechanism the catalogue named: ``saved_us`` of the stage as a share of the plan, capped by its roof. An
    item about the stage's main kernel (the default) is weighed by that kernel's share of the stage; one about the
    whole stage (``whole_stage``: at the roof, launches, host time, a kernel the plan did not declare) is not.
    ``at``: the source line it names (where it is in report.json)."""
    saved = {"saved_us": saved_us} if whole_stage else {"saved_us": saved_us, "kernel_share": e.share}
    return Opportunity(
        name=name,
        gain_pct=e.gain(saved_us if whole_stage else saved_us * e.share),
        metric=trigger[0],
        value=trigger[1],
        change=change,
        named=True,
        stop=stop,
        structural=structural,
        stage=e.name,
        kernel=e.kernel_name,
        formula=GAIN.format(saved=" * ".join(saved)),
        inputs=e.gain_inputs(**saved),
    ).at(at)


def size_words(nbytes: float) -> str:
    """A byte count as a report writes it: 3 significant digits in GB, MB or KB, else bytes."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def roof_words(e: Evidence) -> str:
    """The practical roof that limits the stage, as the report names it."""
    c, s = e.practical, e.stage
    assert c is not None and s.flops is not None and s.dram_bytes is not None
    if rl.limiting_roof(c, s.flops, s.dram_bytes) == "memory":
        return f"{c.gbps:g} GB/s DRAM"
    return f"{c.tflops:g} TFLOP/s {s.precision}"
