"""Nsight Compute reports (.ncu-rep, through the ``ncu-report`` package) -> tidy per-kernel records.

Metric names differ across ncu versions and chips, so every quantity kbench uses is read through one alias
table (first name present wins); a quantity none of whose names is in the report is None, rendered n/a.
Reading needs neither a GPU nor Nsight Compute.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from kbench import nvtx
from kbench.analysis import ncu_layout
from kbench.analysis.ncu_source import hot_lines
from kbench.errors import ConfigError, ToolMissing, first_line
from kbench.model import Model

if TYPE_CHECKING:
    pass

# Tensor-core operations by operand precision (one op = one FLOP): the precision the tensor cores really ran
TENSOR_PATHS = {
    "bf16": "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "fp16": "sm__ops_path_tensor_src_fp16.sum",
    "tf32": "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "fp8": "sm__ops_path_tensor_src_fp8_sparsity_off.sum",
    "fp64": "sm__ops_path_tensor_src_fp64.sum",
}
# The SM's instruction pipes whose utilisation (instructions executed over the pipe's peak) annotation mode reads:
# load/store, FP32 FMA, integer/logic ALU, special functions (xu), FP64, address divergence, warpgroup and warp MMA
PIPES = ("lsu", "fma", "alu", "xu", "fp64", "adu", "uniform", "tensor_op_gmma", "tensor_op_hmma")
# Every warp-state reason ncu samples on Hopper (the profiling guide's "Warp Stall Reasons"), but "selected" (the
# warp that issued): per reason, warps stalled on it per issued instruction
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss", "lg_throttle", "long_scoreboard",
    "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "short_scoreboard",
    "sleeping", "tex_throttle", "wait",
)  # fmt: skip

# canonical name -> metric names, preferred first
ALIASES: dict[str, tuple[str, ...]] = {
    "duration_ns": ("gpu__time_duration.sum",),
    "dram_read_bytes": ("dram__bytes_read.sum",),
    "dram_write_bytes": ("dram__bytes_write.sum",),
    "dram_pct": (
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    "tc_pct": ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "compute_memory_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
    "spill_load_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",),
    "spill_store_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",),
    "spill_requests": ("derived__local_spilling_requests",),
    "spill_load_sectors": ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",),
    "spill_store_sectors": ("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",),
    "sm_clock_hz": ("sm__cycles_elapsed.avg.per_second",),
    # how evenly the SMs were kept busy: the average SM's active cycles against the busiest SM's
    "sm_active_avg": ("sm__cycles_active.avg",),
    "sm_active_max": ("sm__cycles_active.max",),
    # coalescing: the bytes a global load / store instruction uses of each 32-byte sector it touches (0 when the
    # kernel issued none of that kind: cp.async and TMA copies are not counted here)
    "ld_bytes_per_sector": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",),
    "st_bytes_per_sector": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",),
    "global_ld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "global_st_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",),
    "sm_count": ("launch__sm_count",),
    "ctas_per_sm_registers": ("launch__occupancy_limit_registers",),
    "ctas_per_sm_shared": ("launch__occupancy_limit_shared_mem",),
    "ctas_per_sm_warps": ("launch__occupancy_limit_warps",),
    "ctas_per_sm_blocks": ("launch__occupancy_limit_blocks",),
    "waves": ("launch__waves_per_multiprocessor",),
    "registers": ("launch__registers_per_thread",),
    "shared_bytes": ("launch__shared_mem_per_block",),
    "stream": ("launch__stream_id",),
    "grid_size": ("launch__grid_size",),
    "block_size": ("launch__block_size",),
    "replay_passes": ("profiler__replayer_passes",),
    # issue: the share of cycles an SM sub-partition issued an instruction (the issue-slot ceiling is 100%)
    "issue_pct": ("smsp__issue_active.avg.pct_of_peak_sustained_active",),
    "instructions": ("smsp__inst_executed.sum",),
    "inst_issued": ("smsp__inst_issued.sum",),  # warp instructions issued (replays included): the issue roof's count
    # shared memory: wavefronts the data pipe processed and the extra ones bank conflicts caused
    "shared_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",),
    "shared_bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",),
    # global atomics and reductions (atom / red instructions' requests)
    "global_atomic_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",),
    "global_red_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",),
    **{f"tensor_flops_{p}": (n,) for p, n in TENSOR_PATHS.items()},
    **{f"pipe_{p}_pct": (f"sm__inst_executed_pipe_{p}.avg.pct_of_peak_sustained_active",) for p in PIPES},
}

# Measured FLOPs: tensor-core operations (sm__ops_path_tensor_*, one op = one FLOP) and CUDA-core
# floating-point instructions per thread (an FMA is two FLOPs).
TENSOR_FLOPS = tuple(TENSOR_PATHS.values())
SCALAR_FLOPS = {
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": (2 if op == "fma" else 1)
    for p in ("f", "d", "h")
    for op in ("add", "mul", "fma")
}

# What annotation mode asks ncu for: the counters above (launch__ ones come free) and the FLOP counts.
ANNOTATION_METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    "sm__cycles_elapsed.avg.per_second",
    "sm__cycles_active.avg",
    "sm__cycles_active.max",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",
    *TENSOR_FLOPS,
    *SCALAR_FLOPS,
    # what the diagnosis catalogue reads beyond the roofline (docs/diagnosis.md): the warp states, the issue slots,
    # the pipes, shared-memory bank conflicts and global atomics
    *(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS),
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "smsp__inst_issued.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
    *(f"sm__inst_executed_pipe_{p}.avg.pct_of_peak_sustained_active" for p in PIPES),
)

# Time by source line in annotation mode: of ncu's SourceCounters section only the two the per-line model reads,
# the instructions executed per SASS instruction and the warp-state (PC) samples, with the source imported
ANNOTATION_SOURCE_METRICS = ("inst_executed", "group:smsp__pcsamp_warp_stall_reasons")

NO_NCU_REPORT = (
    "reading an Nsight Compute report needs NVIDIA's ncu_report module, which is not importable here: "
    "pip install ncu-report==2025.3.1 (kbench's own requirement), or put Nsight Compute's ncu on PATH or KBENCH_NCU "
    "(its extras/python folder holds the module of that release)"
)
SPEEDUP_TYPES = {0: "unknown", 1: "local", 2: "global"}  # ncu_report.SpeedupType_*


class Rule(Model):
    rule_id: str
    section: str
    title: str
    message: str
    speedup_pct: float | None = None
    speedup_type: str | None = None
    focus: list[tuple[str, float | str]] = Field(default_factory=list)


class Kernel(Model):
    """One profiled launch: identity, the canonical metrics (None = not in the report), its rules."""

    index: int
    name: str
    nvtx: list[str]
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    metrics: dict[str, float | None]
    device: str | None = None
    tensor_flops: float | None  # None: the report has no sm__ops_path_tensor_* metric
    scalar_flops: float | None  # None: the report has no per-thread FP instruction counts
    rules: list[Rule] = Field(default_factory=list)
    # warp-stall reason -> warps stalled on it per issued instruction (full set)
    stalls: dict[str, float] = Field(default_factory=dict)
    # its 3 source lines with the most sampled stalls (reports with source counters)
    hot_lines: list[str] = Field(default_factory=list)
    own_shared_bytes: int | None = None  # a CTA's static + dynamic shared memory (no driver reserve, as CUPTI's)

    @property
    def measured_flops(self) -> float | None:
        """Tensor plus CUDA-core FLOPs; None unless both kinds were counted (a partial count would mislead)."""
        if self.tensor_flops is None or self.scalar_flops is None:
            return None
        return self.tensor_flops + self.scalar_flops

    def m(self, key: str) -> float | None:
        return self.metrics.get(key)

    @property
    def duration_us(self) -> float | None:
        ns = self.m("duration_ns")
        return None if ns is None else ns / 1000.0

    @property
    def measured_bytes(self) -> float | None:
        r, w = self.m("dram_read_bytes"), self.m("dram_write_bytes")
        return None if r is None or w is None else r + w

    @property
    def spill_bytes(self) -> float | None:
        """Local-memory traffic (register spills): bytes where counted, else 32-byte sectors (ncu's full set)."""
        ld, st = self.m("spill_load_bytes"), self.m("spill_store_bytes")
        if ld is not None and st is not None:
            return ld + st
        ld, st = self.m("spill_load_sectors"), self.m("spill_store_sectors")
        return None if ld is None or st is None else 32.0 * (ld + st)

    @property
    def occupancy_limits(self) -> dict[str, float]:
        """ncu's launch limits on CTAs per SM, by what sets each (those in the report)."""
        named = {"registers": "registers", "shared memory": "shared", "warps": "warps", "blocks": "blocks"}
        return {w: v for w, k in named.items() if (v := self.m(f"ctas_per_sm_{k}")) is not None}

    @property
    def ctas_per_sm(self) -> float | None:
        """How many of its CTAs fit on one SM: the tightest of ncu's occupancy limits."""
        return min(self.occupancy_limits.values(), default=None)

    @property
    def occupancy_limiter(self) -> str | None:
        """The launch limit that allows the fewest CTAs per SM."""
        limits = self.occupancy_limits
        return min(limits, key=limits.__getitem__) if limits else None

    @property
    def ctas(self) -> int | None:
        return None if self.grid is None else self.grid[0] * self.grid[1] * self.grid[2]


def _value(action: Any, name: str) -> Any:
    m = action.metric_by_name(name)
    if m is None or (hasattr(m, "has_value") and not m.has_value()):
        return None
    return m.value()


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _dims(action: Any, prefix: str) -> tuple[int, int, int] | None:
    vals = [_number(_value(action, f"launch__{prefix}_dim_{a}")) for a in "xyz"]
    return None if any(v is None for v in vals) else (int(vals[0]), int(vals[1]), int(vals[2]))  # type: ignore[arg-type]


def _flops(action: Any, weights: dict[str, int]) -> float | None:
    present = [v * w for n, w in weights.items() if (v := _number(_value(action, n))) is not None]
    return sum(present) if present else None


def _rules(action: Any) -> list[Rule]:
    out = []
    for r in action.rule_results_as_dicts():
        msg = r.get("rule_message") or {}
        sp = r.get("speedup_estimation") or {}
        out.append(
            Rule(
                rule_id=str(r.get("rule_identifier", "")),
                section=str(r.get("section_identifier", "")),
                title=str(msg.get("title") or r.get("name") or ""),
                message=str(msg.get("message", "")),
                speedup_pct=_number(sp.get("speedup")),
                speedup_type=SPEEDUP_TYPES.get(sp.get("type", 0)) if sp else None,
                focus=[(str(f["name"]), f["value"]) for f in r.get("focus_metrics") or [] if "name" in f],
            )
        )
    return out


def _nvtx(action: Any) -> list[str]:
    state = action.nvtx_state()
    if state is None:
        return []
    return [str(r) for d in state.domains() for r in state.domain_by_id(d).push_pop_ranges()]


class Actions(list[Any]):
    """The profiled actions of a report; holds the report too, since every action points into it."""

    def __init__(self, report: Any, actions: list[Any]) -> None:
        super().__init__(actions)
        self.report = report


# ncu_report crashes (SIGSEGV) when a second report is loaded after an earlier one was freed, so every report
# loaded stays alive for the process (seen with ncu-report 2025.3.1 on the fixtures).
_LOADED: dict[tuple[Path, int, int], Actions] = {}


def load_actions(path: Path) -> Actions:
    """The profiled actions of a report, in order (ranges flattened)."""
    if path.is_file():
        st = path.resolve().stat()
        key = (path.resolve(), st.st_mtime_ns, st.st_size)
        if key not in _LOADED:
            _LOADED[key] = _load(path)
        return _LOADED[key]
    raise ConfigError(f"no such ncu report: {path}")


def _load(path: Path) -> Actions:
    if not path.is_file():
        raise ConfigError(f"no such ncu report: {path}")
    ncu_layout.check(path)  # its size and layout, before ncu_report spends memory on what it declares
    try:
        import ncu_report
    except ImportError:
        raise ToolMissing(NO_NCU_REPORT) from None

    try:
        report = ncu_report.load_report(str(path))
    except Exception as e:  # the library raises plain exceptions for unreadable files
        raise ConfigError(f"cannot read ncu report {path}: {first_line(e)}") from None
    if report is None:
        raise ConfigError(f"cannot read ncu report {path}")
    ranges = [report.range_by_idx(r) for r in range(report.num_ranges())]
    return Actions(report, [rg.action_by_idx(a) for rg in ranges for a in range(rg.num_actions())])


def kernels(path: Path) -> list[Kernel]:
    """Every profiled kernel of ``path`` as a record."""
    out = []
    actions = load_actions(path)
    for i, action in enumerate(actions):
        metrics: dict[str, float | None] = {}
        for key, names in ALIASES.items():
            metrics[key] = next((v for n in names if (v := _number(_value(action, n))) is not None), None)
        out.append(
            Kernel(
                index=i,
                name=str(action.name()),
                nvtx=_nvtx(action),
                grid=_dims(action, "grid"),
                block=_dims(action, "block"),
                device=(str(d) if (d := _value(action, "device__attribute_display_name")) else None),
                metrics=metrics,
                rules=_rules(action),
                tensor_flops=_flops(action, dict.fromkeys(TENSOR_FLOPS, 1)),
                scalar_flops=_flops(action, SCALAR_FLOPS),
                stalls=_stalls(action),
                hot_lines=hot_lines(action),
                own_shared_bytes=_own_shared(action),
            )
        )
    return out


def _own_shared(action: Any) -> int | None:
    parts = [_number(_value(action, f"launch__shared_mem_per_block_{p}")) for p in ("static", "dynamic")]
    return None if any(p is None for p in parts) else int(sum(p for p in parts if p is not None))


STALL_RATIO = re.compile(r"^smsp__average_warps_issue_stalled_(?P<reason>\w+?)_per_issue_active\.ratio$")


def _stalls(action: Any) -> dict[str, float]:
    """Why warps did not issue: per reason, the warps stalled on it per issued instruction (ncu's full set; empty
    for a short metric list). 'selected' (the warp that did issue) is not a stall."""
    out = {}
    for name in action.metric_names():
        m = STALL_RATIO.match(name)
        if m and m.group("reason") != "selected" and (v := _number(_value(action, name))):
            out[m.group("reason")] = v
    return out


def all_metrics(action: Any) -> list[tuple[str, str]]:
    """Every metric of an action as (name, value text), instanced metrics summarised by their count."""
    rows = []
    for name in sorted(action.metric_names()):
        m = action.metric_by_name(name)
        if m.num_instances() > 1:
            rows.append((name, f"({m.num_instances()} instances)"))
            continue
        v = m.value() if m.has_value() else None
        rows.append((name, "n/a" if v is None else str(v)))
    return rows


def stage_of(k: Kernel) -> str | None:
    """The plan stage whose NVTX range (``kbench.<stage>``) encloses the kernel, if any."""
    return next((s for r in k.nvtx if (s := nvtx.stage_of(r)) is not None), None)


def kernels_table(ks: list[Kernel], stages: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """The tidy table: one row per profiled kernel, a column per canonical metric (None = not in the report)."""
    rows = []
    for k in ks:
        rows.append(
            {
                "index": k.index,
                "stage": (stages or {}).get(k.index, stage_of(k) or ""),
                "kernel": k.name,
                "nvtx": ";".join(k.nvtx),
                "grid": "x".join(map(str, k.grid)) if k.grid else "",
                "block": "x".join(map(str, k.block)) if k.block else "",
                **k.metrics,
                "tensor_flops": k.tensor_flops,
                "scalar_flops": k.scalar_flops,
                "measured_flops": k.measured_flops,
                "measured_bytes": k.measured_bytes,
            }
        )
    return rows


RULE_COLUMNS = ("stage", "kernel_index", "kernel", "rule", "section", "title", "speedup_pct", "speedup_type", "focus",
                "message")  # fmt: skip


def rules_table(ks: list[Kernel], stages: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """Every rule result: stage, kernel, rule id, section, title, estimated speedup and its type, focus metrics."""
    return [
        {
            "stage": (stages or {}).get(k.index, stage_of(k) or ""),
            "kernel_index": k.index,
            "kernel": k.name,
            "rule": r.rule_id,
            "section": r.section,
            "title": r.title,
            "speedup_pct": r.speedup_pct,
            "speedup_type": r.speedup_type,
            "focus": "; ".join(f"{n}={v}" for n, v in r.focus),
            "message": r.message,
        }
        for k in ks
        for r in k.rules
    ]
