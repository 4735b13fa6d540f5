"""Per-stage hardware counters from profiled kernels, the health checks of report-contract section 3, and the
checks of a plan's analytic model against what was counted. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from kbench.analysis import bottleneck as b
from kbench.analysis.ncu import PIPES, TENSOR_PATHS, Kernel
from kbench.model import Model


class StageCounters(Model):
    """A stage's kernels combined: times and bytes summed, rates weighted by each kernel's duration."""

    stage: str
    kernels: list[str]
    grids: list[str]
    duration_us: float
    tc_pct: float | None
    sm_pct: float | None
    dram_pct: float | None
    occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    l2_hit_pct: float | None
    spill_bytes: float | None
    waves: float | None
    registers: float | None
    shared_bytes: float | None
    measured_flops: float | None
    tensor_flops: float | None
    measured_bytes: float | None
    replay_passes: float | None
    # the stage's longest kernel: its grid and how many of its CTAs an SM holds; the SMs and clock it ran on
    ctas: int | None = None
    ctas_per_sm: float | None = None
    sm_count: float | None = None
    sm_clock_mhz: float | None = None
    occupancy_limiter: str | None = None  # what caps the CTAs per SM: registers, shared memory, warps, blocks
    # coalescing of global loads and stores: sectors touched, and the bytes of each used (of 32), over the kernels
    ld_sectors: float | None = None
    st_sectors: float | None = None
    ld_use: float | None = None
    st_use: float | None = None
    tensor_paths: dict[str, float] = Field(default_factory=dict)  # tensor FLOPs by operand precision, summed
    issue_pct: float | None = None  # issue slots used (smsp__issue_active), weighted by duration
    # the issue roof's inputs: warp instructions issued (executed where issued was not counted: a floor), summed, and
    # SM cycles elapsed (SMs x measured SM clock x duration, summed over the kernels)
    inst_issued: float | None = None
    inst_counter: str | None = None  # the metric ``inst_issued`` comes from
    sm_cycles: float | None = None
    # the longest kernel's SMs: the average SM's active cycles over the busiest SM's, in % (100: evenly busy)
    sm_busy_pct: float | None = None
    pipes: dict[str, float] = Field(default_factory=dict)  # instruction pipe -> % of its peak, weighted by duration
    shared_wavefronts: float | None = None
    shared_conflicts: float | None = None
    stalls: dict[str, float] = Field(default_factory=dict)  # the longest kernel's warp-stall reasons (ncu's full set)
    hot_lines: list[str] = Field(default_factory=list)  # the longest kernel's source lines with the most stall samples

    @property
    def compute_pct(self) -> float | None:
        """Tensor pipe, or SM throughput for arithmetic outside the tensor cores (contract section 4)."""
        vals = [v for v in (self.tc_pct, self.sm_pct) if v is not None]
        return max(vals) if vals else None

    def bottleneck(self) -> b.StageClass | None:
        if self.compute_pct is None or self.dram_pct is None:
            return None
        return b.classify(self.compute_pct, self.dram_pct)

    def issues(self, reuse_lost: bool | None = None) -> list[str]:
        """Section 3's unhealthy metrics, most severe first, each as 'what (metric=value)'. Low occupancy only
        where the kernel's own limits cap it below the healthy level; an idle-SM grid only when CTAs < SMs; a low
        L2 hit rate only where DRAM traffic shows reuse was lost (``reuse_lost``; None: no model to tell)."""
        out = []
        if self.spill_bytes:
            out.append(f"register spilling ({self.spill_bytes:.0f} local bytes)")
        cap = self.theoretical_occupancy_pct
        if cap is not None and cap < b.HEALTHY_OCCUPANCY_PCT:
            out.append(f"occupancy capped at {cap:.1f}% by {self.occupancy_limiter or 'its launch limits'}")
        if self.ctas is not None and self.sm_count and self.ctas < self.sm_count:
            out.append(f"underfilled GPU ({self.ctas} CTAs on {self.sm_count:.0f} SMs)")
        if reuse_lost and b.locality_issue(self.l2_hit_pct):
            out.append(f"L2 hit {self.l2_hit_pct:.1f}% < {b.HEALTHY_L2_HIT_PCT:.0f}%")
        return out


def _weighted(ks: Sequence[Kernel], key: str) -> float | None:
    pairs = [(k.m(key), k.duration_us) for k in ks]
    if any(v is None or d is None for v, d in pairs) or not pairs:
        return None
    total = sum(d for _, d in pairs if d is not None)
    return sum(v * d for v, d in pairs if v is not None and d is not None) / total if total else None


def _sum(values: Sequence[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)


def _extreme(values: Sequence[float | None], largest: bool) -> float | None:
    present = [v for v in values if v is not None]
    return (max(present) if largest else min(present)) if present else None


def _sector_use(ks: Sequence[Kernel], op: str) -> tuple[float | None, float | None]:
    """Sectors the kernels' global ``op`` ("ld" / "st") instructions touched, and the bytes of each they used,
    weighted by sectors; kernels that issued none (a use of 0 or n/a) are left out."""
    pairs = [(k.m(f"global_{op}_sectors"), k.m(f"{op}_bytes_per_sector")) for k in ks]
    used = [(n, u) for n, u in pairs if n and u]
    if not used:
        return None, None
    total = sum(n for n, _ in used)
    return total, sum(n * u for n, u in used) / total


def _sm_cycles(k: Kernel) -> float | None:
    n, hz, us = k.m("sm_count"), k.m("sm_clock_hz"), k.duration_us
    return None if n is None or hz is None or us is None else n * hz * us * 1e-6


def _issued(ks: Sequence[Kernel]) -> tuple[float | None, str | None, float | None]:
    """Warp instructions issued over the kernels (smsp__inst_issued; else smsp__inst_executed, which leaves out
    replays), the metric, and SM cycles elapsed: SMs x the SM clock ncu measured x duration, summed."""
    issued = _sum([k.m("inst_issued") for k in ks])
    metric = "smsp__inst_issued.sum"
    if issued is None:
        issued, metric = _sum([k.m("instructions") for k in ks]), "smsp__inst_executed.sum"
    cycles = _sum([_sm_cycles(k) for k in ks])
    return issued, metric if issued is not None else None, cycles


def _busy(k: Kernel) -> float | None:
    """The average SM's active cycles over the busiest SM's (sm__cycles_active avg / max), in %."""
    avg, top = k.m("sm_active_avg"), k.m("sm_active_max")
    return 100.0 * avg / top if avg is not None and top else None


def combine(stage: str, ks: Sequence[Kernel]) -> StageCounters:
    if not ks:
        raise ValueError(f"stage {stage} has no kernels")
    main = max(ks, key=lambda k: k.duration_us or 0.0)  # grid and waves of the kernel that takes the time
    (ld_sectors, ld_use), (st_sectors, st_use) = _sector_use(ks, "ld"), _sector_use(ks, "st")
    inst_issued, inst_counter, sm_cycles = _issued(ks)
    return StageCounters(
        stage=stage,
        kernels=[k.name for k in ks],
        grids=[f"{k.grid}x{k.block}" if k.grid and k.block else "n/a" for k in ks],
        duration_us=_sum([k.duration_us for k in ks]) or 0.0,
        tc_pct=_weighted(ks, "tc_pct"),
        sm_pct=_weighted(ks, "sm_pct"),
        dram_pct=_weighted(ks, "dram_pct"),
        occupancy_pct=_weighted(ks, "occupancy_pct"),
        theoretical_occupancy_pct=_extreme([k.m("theoretical_occupancy_pct") for k in ks], largest=False),
        l2_hit_pct=_weighted(ks, "l2_hit_pct"),
        spill_bytes=_sum([k.spill_bytes for k in ks]),
        waves=main.m("waves"),
        registers=_extreme([k.m("registers") for k in ks], largest=True),
        shared_bytes=_extreme([k.m("shared_bytes") for k in ks], largest=True),
        measured_flops=_sum([k.measured_flops for k in ks]),
        tensor_flops=_sum([k.tensor_flops for k in ks]),
        measured_bytes=_sum([k.measured_bytes for k in ks]),
        replay_passes=_extreme([k.m("replay_passes") for k in ks], largest=True),
        ctas=main.ctas,
        ctas_per_sm=main.ctas_per_sm,
        sm_count=main.m("sm_count"),
        sm_clock_mhz=None if (hz := _weighted(ks, "sm_clock_hz")) is None else hz / 1e6,
        occupancy_limiter=main.occupancy_limiter,
        ld_sectors=ld_sectors,
        st_sectors=st_sectors,
        ld_use=ld_use,
        st_use=st_use,
        tensor_paths={
            p: total
            for p in TENSOR_PATHS
            if (total := _sum([k.m(f"tensor_flops_{p}") for k in ks])) is not None and total > 0
        },
        issue_pct=_weighted(ks, "issue_pct"),
        inst_issued=inst_issued,
        inst_counter=inst_counter,
        sm_cycles=sm_cycles,
        sm_busy_pct=_busy(main),
        pipes={p: v for p in PIPES if (v := _weighted(ks, f"pipe_{p}_pct")) is not None},
        shared_wavefronts=_sum([k.m("shared_wavefronts") for k in ks]),
        shared_conflicts=_sum([k.m("shared_bank_conflicts") for k in ks]),
        stalls=main.stalls,
        hot_lines=main.hot_lines,
    )


class StageModel(Model):
    """A stage's analytic model, when a plan is known: FLOPs, DRAM bytes, precision."""

    flops: float
    dram_bytes: float
    precision: str


# Measured over analytic beyond this factor (either way) is a finding: the model or the kernel is wrong.
MODEL_MISMATCH = 1.25


def model_mismatch(model: StageModel | None, c: StageCounters) -> list[str]:
    """'measured DRAM bytes 1.98x the model' for each of FLOPs and bytes that disagree beyond MODEL_MISMATCH.

    ncu counts the FP adds, multiplies and FMAs the SASS executes and the tensor cores' operations, not max/min,
    compares, MUFU (exp, rsqrt) or integer work, which a model may count as FLOPs (a max-reduction's fmax): fewer
    FLOPs measured than modelled is a finding only where the stage's work is tensor-core work (counted exactly);
    more measured than modelled always is."""
    if model is None:
        return []
    out = []
    for what, measured, analytic in (
        ("FLOPs", c.measured_flops, model.flops),
        ("DRAM bytes", c.measured_bytes, model.dram_bytes),
    ):
        if measured is None or not analytic:
            continue
        ratio = measured / analytic
        counted = what != "FLOPs" or bool(c.tensor_flops)
        if ratio > MODEL_MISMATCH or (ratio < 1 / MODEL_MISMATCH and counted):
            out.append(f"measured {what} {ratio:.2f}x the model")
    return out
