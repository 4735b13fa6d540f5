"""The bottleneck classification of report-contract sections 3 and 4. Every threshold lives here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

StageClass = Literal["Memory", "Compute", "Latency"]

# A unit running at or above this share of its peak is what limits the stage ("high" in section 4);
# below it on both units, neither is saturated and latency (launch, occupancy, dependencies) dominates.
HIGH_PCT = 50.0

# Section 3, "Healthy" column.
HEALTHY_TC_PCT = 60.0
HEALTHY_DRAM_PCT = 70.0
HEALTHY_OCCUPANCY_PCT = 25.0
HEALTHY_L2_HIT_PCT = 80.0
HEALTHY_SPILL_BYTES = 0
HEALTHY_WAVES = 1.0

# Timeline (nsys mode): a plan whose GPU sits idle for at least this share of each iteration is Latency-bound
# whatever its kernels do: over the iteration no unit can then average HIGH_PCT of its peak.
TIMELINE_IDLE_PCT = HIGH_PCT

# Clocks sampled while measuring: an SM clock whose range exceeds this share of its median makes the measurement
# unstable (as does any thermal or power slowdown the GPU reports).
CLOCK_DRIFT_PCT = 5.0
# A sample whose SM clock is below this fraction of the busy median, with no slowdown reason reported, was taken as
# the GPU woke from idle (between ncu's replay passes, say): it is counted with the idle samples.
IDLE_CLOCK_FRACTION = 0.5
# The cross-tool audit (annotation and ncu modes): ncu's duration and the CUDA-event median of the same stage that
# differ by more than this share are flagged with their likely cause; a stage shorter than SHORT_STAGE_US is one
# where the events' launch and event overhead (a few us) alone can explain it.
AUDIT_DIVERGENCE_PCT = 5.0
SHORT_STAGE_US = 20.0
# A stage timed at a median SM clock more than this share below the clock the measurement started at is marked:
# its figure mixes in a power- or heat-lowered clock.
CLOCK_SAG_PCT = 5.0

# Event mode: a timing whose relative spread exceeds this is flagged as unstable.
UNSTABLE_SPREAD_PCT = 2.0
# Repetitions whose last third's median differs from the first third's by more than this share of the median
# drifted (the clock or the temperature moved during the measurement).
DRIFT_PCT = 3.0
# Sorted repetitions with a gap wider than this share of the median, with at least BIMODAL_SIDE_PCT of them on each
# side, fall into two modes (two clock states, or two code paths).
BIMODAL_GAP_PCT = 5.0
BIMODAL_SIDE_PCT = 10.0


# The diagnosis catalogue (analysis/opportunities.py).
# A stage at or above this share of its practical roof (measured ceilings) is done: "stop" is the advice.
AT_ROOF_PCT = 90.0
# A partial last wave is named when it costs at least this share of the stage's time (a stage at its practical roof
# gets "stop" whatever its waves).
TAIL_LOSS_PCT = 2.0
# Measured DRAM bytes over the analytic (compulsory) bytes beyond this, on a memory-limited stage, is excess
# traffic worth naming (the same factor as the model-mismatch finding).
EXCESS_TRAFFIC = 1.25
# FLOPs per compulsory DRAM byte from which a stage in a tensor-core precision is matmul-shaped: each loaded element
# is reused in many products, so tensor cores (not CUDA cores) should do the arithmetic.
MATMUL_SHAPED_INTENSITY = 64.0
TENSOR_PRECISIONS = ("bf16", "fp16", "tf32", "fp8", "int8")
# A stage whose kernels average less than this per launch is launch-bound when the launches, not the work, take
# most of its time: a launch costs the host about 5-20 us (Triton's Python launch path), a GPU kernel a few us.
SHORT_LAUNCH_US = 20.0
# ... and only with at least this many launches per run: with fewer (an output zeroed, then the kernel) one launch's
# average says little about what one fused launch would take.
MANY_LAUNCHES = 8
# Global loads or stores using fewer bytes than this of each 32-byte sector they fetch are uncoalesced (ncu's
# smsp__sass_average_data_bytes_per_sector_mem_global_op_*; 32 is perfect, a 4-byte stride-N access uses 4).
COALESCED_BYTES_PER_SECTOR = 16.0
SECTOR_BYTES = 32.0  # the L1/L2 sector those counters count in
# lanes masked off at a stage's loads and stores (predicted on a CPU, kbench.analysis.access) from which the catalogue
# names them as wasted work: below it, a tail's masked lanes are the normal cost of a size that is no multiple of BLOCK
MASKED_LANES_PCT = 25.0
# Fusing stages is named when it would move at least this share fewer bytes than the stages do apart.
FUSION_MIN_SAVED = 0.1
# Counted FLOPs beyond the plan's model by this factor, where arithmetic sets the time, are work the result does not
# need (padded or masked-out tiles computed): the same factor as the model-mismatch finding.
EXCESS_WORK = 1.25
# A product repeated by every warpgroup is named as the excess's source when the ratio the PTX predicts for it is
# within this share of the counted one.
REPEATED_MATCH = 0.1
# The rows one warpgroup MMA (wgmma) computes, and the registers a thread can hold at most (sm_90): a warpgroup that
# would need more for one accumulator cannot hold it.
WGMMA_M = 64
THREAD_REGISTERS = 255
# Narrow tensor tiles are named when shared memory can feed less than this share of the tensor cores' rate.
TILE_FEED_CAP = 0.9
# ... and fewer warpgroups on the same tile (each thread then holds twice the accumulators) are suggested only for a
# kernel holding at most this many registers per thread (twice it stays within the 255 a thread can have).
REGISTERS_TO_DOUBLE = 127
# ... and no wider tile fits where the CTA holds at least this share of the shared memory an SM gives and at least
# this many registers per thread (the A operand in registers then has no room either).
SHARED_FULL = 0.9
REGISTERS_FULL = 224
# Too few bytes in flight (Little's law): named when an SM's loads in flight are under this share of what DRAM needs
# at its measured latency, and only when the measured bandwidth is no more than IN_FLIGHT_MODEL_SLACK times what
# those bytes in flight allow (a kernel moving more than its static loads explain is not this case).
# The measured latency is an idle chain's; under load requests queue (the stream pair of tests/data/validation moved
# 307 GB/s with 0.5 KiB in flight per SM on an H100: 220 ns effective, 1.47x the idle 149 ns), so an SM needs about
# this many times (bandwidth x idle latency) in flight.
IN_FLIGHT_ENOUGH = 1.5
IN_FLIGHT_MODEL_SLACK = 1.5
# Without the TTGIR (records made before it was kept): a kernel whose PTX holds this many global atomic instructions
# per thread, not predicated to one thread, updates per element (a block of values).
PER_ELEMENT_ATOMICS = 2
# Atomic contention is named when the atomics as executed, serialized at their addresses (conf/devices.json's measured
# atomic_same_address_ns each), take at least this share of the kernel's time.
ATOMIC_SERIAL_SHARE = 0.5
# FP64 arithmetic in a stage of another precision is named when its time at the SM's FP64 rate is at least this share
# of the stage's distance to its roof.
FP64_SHARE = 0.25


def classify(compute_pct: float, memory_pct: float) -> StageClass:
    """Section 4: DRAM high / compute low -> Memory; compute high / DRAM low -> Compute; both low -> Latency;
    both high -> the one closer to its roof."""
    compute_high, memory_high = compute_pct >= HIGH_PCT, memory_pct >= HIGH_PCT
    if compute_high and memory_high:
        return "Compute" if compute_pct >= memory_pct else "Memory"
    if memory_high:
        return "Memory"
    if compute_high:
        return "Compute"
    return "Latency"


def locality_issue(l2_hit_pct: float | None) -> bool:
    """Section 4's flag on top of the class: an L2 hit rate under the healthy threshold (None: not measured)."""
    return l2_hit_pct is not None and l2_hit_pct < HEALTHY_L2_HIT_PCT


def plan_class(stages: Iterable[tuple[float, StageClass]]) -> StageClass:
    """The whole plan's class: the class holding the largest share of the plan's time."""
    totals: dict[StageClass, float] = {}
    for duration, cls in stages:
        totals[cls] = totals.get(cls, 0.0) + duration
    if not totals:
        raise ValueError("a plan has at least one stage")
    return max(totals.items(), key=lambda kv: kv[1])[0]


# Issue roof (catalogue/issue.py): issue-bound when the warp instructions issued fill this share of the issue roof
# and more of it than of the compute and memory roofs, and at least REMOVABLE_ISSUE_PCT of them lie beyond what the
# modelled work needs at least (else the instructions are the work: nothing to remove)
ISSUE_BOUND_PCT = 80.0
REMOVABLE_ISSUE_PCT = 25.0
# Uneven programs (catalogue/programs.py): the longest program's work over the mean program's at least this
UNEVEN_PROGRAMS = 1.25
# ... unless a unit is this busy (% of its roof): then DRAM or the compute units, not the longest programs, set the time
UNIT_SETS_TIME_PCT = 80.0
# SMs idle while the longest programs run (catalogue/programs.py idle_sms): the average SM's active cycles below this
# share of what the grid's waves allow
SM_BUSY_SHARE = 0.8
