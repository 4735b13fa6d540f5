"""The compute family: tensor cores idle, tensor work in a lower precision than the plan's, warp-level MMA where the
GPU has warpgroup MMA, tensor tiles too narrow for shared memory to feed, operand loads not pipelined, measured work
beyond the model. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kbench.analysis import bottleneck as b
from kbench.analysis.catalogue import routes
from kbench.analysis.catalogue.evidence import GAIN, Evidence, Opportunity, finding
from kbench.analysis.ptx import OPERAND_BYTES
from kbench.analysis.ttgir import DotOp


def tensor_cores_idle(e: Evidence) -> Opportunity | None:
    s = e.stage
    if e.tensor_cores is not False or s.precision not in b.TENSOR_PRECISIONS or e.bound_us is None:
        return None
    if s.intensity is None or s.intensity < b.MATMUL_SHAPED_INTENSITY:
        return None
    return finding(
        e,
        f"Tensor cores idle in {e.name}: {s.flops:.3g} {s.precision} FLOPs at {s.intensity:.0f} FLOP/B run on the "
        "CUDA cores",
        e.us - e.bound_us,
        (f"{e.name}.tensor_core_work", "none"),
        f"compute {e.name}'s products on the tensor cores with warpgroup_mma: {s.precision} tiles of A and B in "
        "shared memory (NVMMASharedLayout; A may stay in registers as a DotOperandLayout), the fp32 accumulator in "
        f"an NVMMADistributedLayout over whole warpgroups ({e.larger_blocks.removeprefix('larger ')})"
        if e.gluon
        else f"compute {e.name}'s products with tl.dot: {s.precision} tiles of A (BLOCK_M x BLOCK_K) and B (BLOCK_K "
        "x BLOCK_N), accumulated in fp32",
    )


def _used_precision(e: Evidence) -> str | None:
    """The precision the tensor cores ran: ncu's tensor FLOPs by operand path where counted (the largest), else the
    compiled kernel's tensor instructions (one operand precision throughout)."""
    if e.tensor_paths and sum(e.tensor_paths.values()) > 0:
        return max(e.tensor_paths.items(), key=lambda kv: kv[1])[0]
    return e.instructions.operand_precision if e.instructions else None


def tensor_precision(e: Evidence) -> Opportunity | None:
    """Tensor work in a slower precision than the plan's (operands converted up before tl.dot): at the plan
    precision's practical rate the same FLOPs take (used rate / plan rate) of the time."""
    s, plan = e.stage, e.practical
    used = _used_precision(e)
    if used is None or used == s.precision or plan is None or e.memory_limited:
        return None
    slow = e.practical_by_precision.get(used)
    if slow is None or slow.tflops >= plan.tflops:
        return None
    per_clock = {str(p): v for p, v in e.limits.tensor_flops_per_clock.items()} if e.limits else {}
    if used in per_clock and s.precision in per_clock and per_clock[used] >= per_clock[s.precision]:
        return None  # the hardware runs both at one rate (bf16 and fp16): the measured difference is not the precision
    return finding(
        e,
        f"Tensor cores run {used} in {e.name}, not the plan's {s.precision}: {slow.tflops:g} against "
        f"{plan.tflops:g} TFLOP/s on this device",
        e.us * (1.0 - slow.tflops / plan.tflops),
        (f"{e.name}.tensor_precision", used),
        f"give warpgroup_mma {e.name}'s {s.precision} tiles as loaded (no .to(gl.float32) before the MMA; "
        "accumulate in fp32 through its accumulator), so the tensor cores run the plan's precision"
        if e.gluon
        else f"give tl.dot {e.name}'s {s.precision} tiles as loaded (no .to(tl.float32) before the dot; accumulate "
        "in fp32 through the dot's accumulator), so the tensor cores run the plan's precision",
    )


def warp_mma(e: Evidence) -> Opportunity | None:
    """Warp-level mma.sync on a GPU with warpgroup MMA (Hopper's wgmma): the warp-level path does not reach the
    tensor cores' practical rate; the whole distance to the roof is what wgmma can buy at most."""
    mix = e.instructions
    if mix is None or "sm_90" not in (e.arch or "") or e.memory_limited:
        return None
    if not any(o.op == "mma" for o in mix.tensor_ops) or any(o.op == "wgmma" for o in mix.tensor_ops):
        return None
    shapes = ", ".join(sorted({f"mma.sync {o.shape}" for o in mix.tensor_ops}))
    warps = f" (now {e.warps})" if e.warps else ""
    return finding(
        e,
        f"Warp-level MMA in {e.name} on a Hopper GPU: {shapes}, no warpgroup MMA (wgmma)",
        e.gap_us,
        (f"{e.name}.tensor_instruction", "mma.sync"),
        f"use warpgroup_mma in {e.name} instead of the warp-level MMA: an NVMMADistributedLayout(version=[3, 0]) "
        f"accumulator over whole warpgroups (num_warps a multiple of 4{warps}), 64 rows per warpgroup, operands in "
        "NVMMASharedLayout shared memory"
        if e.gluon
        else f"let Triton emit wgmma for {e.name}: num_warps a multiple of 4{warps} and BLOCK_M a multiple of 64 per "
        "warpgroup, operands from shared memory (tl.dot on loaded tiles)",
    )


def tile_feed(e: Evidence) -> tuple[float, str] | None:
    """How much of the tensor cores' rate shared memory can feed the kernel's warpgroup MMAs: each wgmma mMnNkK
    reads B (K x N) and, unless A sits in registers, A (M x K) from shared memory; it does 2MNK FLOPs. Over
    what the SM's tensor cores do per clock (FLOPs) against what its shared memory gives per clock (bytes), the
    FLOP-weighted cap, and the narrowest shape's words; None where not known or not capped."""
    mix, lim = e.instructions, e.limits
    if mix is None or lim is None or not lim.shared_bytes_per_clock:
        return None
    rates: dict[str, float] = {str(p): v for p, v in lim.tensor_flops_per_clock.items()}
    flops_w = slowed_w = 0.0
    narrow = None
    for o in mix.tensor_ops:
        dims, prec = o.dims, o.precision
        rate = rates.get(prec or "")
        size = OPERAND_BYTES.get(prec or "")
        if o.op != "wgmma" or dims is None or not rate or not size:
            continue
        m, n, k = dims
        flops = 2.0 * m * n * k
        nbytes = size * (k * n + (0 if o.a_from == "registers" else m * k))
        need = rate / lim.shared_bytes_per_clock
        cap = min(1.0, flops / nbytes / need)
        flops_w += flops * o.count
        slowed_w += flops * o.count / cap
        if cap < 1.0 and (narrow is None or cap < narrow[0]):
            narrow = (cap, f"wgmma {o.shape} reads {flops / nbytes:.0f} FLOP per shared-memory byte, {need:.0f} needed")
    if not flops_w or narrow is None:
        return None
    return flops_w / slowed_w, narrow[1]


def narrow_tiles(e: Evidence) -> Opportunity | None:
    """Tensor tiles too narrow for shared memory to feed: at the FLOP-weighted cap the stage cannot exceed that share
    of the tensor rate; wider tiles lift it. Where the CTA's shared memory is nearly all the SM gives (SHARED_FULL)
    and its registers are near a thread's most (REGISTERS_FULL), neither a wider tile at the same depth nor the A
    operand in registers fits: structural."""
    fed = tile_feed(e)
    if fed is None or e.memory_limited or fed[0] >= b.TILE_FEED_CAP:
        return None
    cap, words = fed
    # fewer warpgroups on the same tile double each thread's accumulators: offered only where registers allow it
    split = (
        "the accumulator layout's warps_per_cta with one warpgroup along N holds the whole tile"
        if e.gluon
        else "num_warps=4 gives one warpgroup the whole BLOCK_N"
    )
    fewer = (
        f", fewer warpgroups splitting the same tile ({split})"
        if e.registers is not None and e.registers <= b.REGISTERS_TO_DOUBLE and (e.warps or 0) > 4
        else ""
    )
    fewer_stages = "fewer shared-memory stages in its mbarrier ring" if e.gluon else "fewer num_stages"
    seesaw = f"; or, {routes.SEESAW}" if e.gluon and (e.warps or 0) > 4 else ""
    now = f" (now {e.config})" if e.config else ""
    name = f"Narrow tensor tiles in {e.name}: {words}; shared memory feeds at most {100 * cap:.0f}% of the tensor rate"
    trigger = (f"{e.name}.tensor_feed_cap", f"{100 * cap:.0f}%")
    limit = e.limits.shared_bytes if e.limits else None
    full = e.shared_bytes is not None and limit and e.shared_bytes >= b.SHARED_FULL * limit
    if full and e.registers is not None and e.registers >= b.REGISTERS_FULL:
        return finding(
            e,
            name,
            e.us * (1.0 - cap),
            trigger,
            f"no wider tile fits {e.name} as it is{now}: its CTA holds {e.shared_bytes:.0f} of the {limit} bytes of "
            f"shared memory an SM gives, so a larger BLOCK_N fits only with {fewer_stages} (the next tiles' loads "
            f"then wait unpipelined), and {e.registers:.0f} registers per thread leave no room for the A operand in "
            "registers. Less shared memory per tile first (operands not kept whole for the loop, fewer stages of "
            f"smaller tiles) or fewer registers (see the other items){seesaw}",
            structural=True,
        )
    return finding(
        e,
        name,
        e.us * (1.0 - cap),
        trigger,
        f"wider tiles per warpgroup MMA in {e.name}: an n of 64 or more per wgmma, that is a larger BLOCK_N (shared "
        f"memory permitting){fewer}, or the A operand kept in registers{now}{seesaw}",
    )


def unpipelined(e: Evidence) -> Opportunity | None:
    """A tensor-core loop whose operand tiles come through plain loads, with no asynchronous copies (cp.async or TMA)
    in flight while the tensor cores work: each iteration waits its loads' whole latency. Compiled with num_stages=1,
    or with more where the TTGIR shows the dots in a loop (Triton's pipeliner left it: a tl.debug_barrier in the
    loop stops it); with more stages and no dot in a loop there is nothing to pipeline (one tile). Up to the
    distance to the roof."""
    mix = e.instructions
    if mix is None or not mix.tensor_ops or mix.cp_async or mix.tma_loads or not mix.global_loads:
        return None
    if e.num_stages is None:
        return None
    if e.num_stages > 1:
        return _left_unpipelined(e)
    stages = f" (num_stages={e.num_stages})"
    return finding(
        e,
        f"Operand loads not pipelined in {e.name}{stages}: its tensor-core loop loads tiles with plain global loads, "
        "no asynchronous copies overlap them",
        e.gap_us,
        (f"{e.name}.async_copies", "0"),
        f"pipeline {e.name}'s operand loads: copy the next tiles by TMA into a ring of 2 to 4 shared-memory stages, "
        "an mbarrier each, while the current ones multiply"
        if e.gluon
        else f"pipeline {e.name}'s operand loads: num_stages of 3 or 4 (Triton then copies the next tiles with "
        "cp.async or TMA while the current ones multiply)",
    )


def _left_unpipelined(e: Evidence) -> Opportunity | None:
    """``unpipelined`` where Triton was asked for num_stages > 1 and left the loop as it was: the TTGIR's dots in a
    loop (a trip count other than 1), and what stops the pipeliner where the TTGIR shows it (a barrier in a loop)."""
    looped = [d for d in e.dots or [] if d.trips != 1]
    if not looped or e.gluon:
        return None
    barriers = ", ".join(e.loop_barriers or ())
    held = (
        f": a CTA barrier in the loop at {barriers} (tl.debug_barrier) stops Triton's software pipeliner"
        if barriers
        else ""
    )
    remove = (
        f"remove the tl.debug_barrier at {barriers} (whatever the loop exchanges through memory across it then needs "
        f"another way: {routes.PIPELINE_ROUTES[0]})"
        if barriers
        else "find what keeps Triton's pipeliner off the loop (a tl.debug_barrier, loads whose addresses depend on "
        "values loaded in the same iteration) and take it out"
    )
    return finding(
        e,
        f"Operand loads not pipelined in {e.name} although num_stages={e.num_stages}: its tensor-core loop at "
        f"{looped[0].line} loads tiles with plain global loads, no asynchronous copies (cp.async or TMA) in the "
        f"compiled kernel{held}; gain up to the distance to the roof",
        e.gap_us,
        (f"{e.name}.async_copies", "0"),
        f"routes to a pipelined loop in {e.name}{f' (now {e.config})' if e.config else ''}: {remove}; or "
        f"{routes.PIPELINE_ROUTES[1]}; or {routes.PIPELINE_ROUTES[2]}. Pipelining where nothing else changed: "
        "tile_mm's num_stages=1 -> 3, 38.8-39.9% realized (docs/diagnosis.md)",
    )


def excess_work(e: Evidence) -> Opportunity | None:
    """Tensor-core FLOPs counted beyond the plan's model (tiles padded past the problem, masked-out tiles computed,
    recomputation) where arithmetic sets the time. The extra FLOPs cost tensor-pipe time: where the tensor pipe's
    active share was measured, the time saved is that tensor time's excess share (time x tensor-pipe % x (1 - model
    / counted)); the tiles skipped still load, store and wait at their barriers (trimm: the twin that skips them
    stops at 60% of the roof). Without the pipe's share, model / counted of the whole time (an upper bound).
    CUDA-core FLOPs are left out (address and mask arithmetic in floats would read as extra work). Where the
    compiled kernel's warpgroups repeat a product and that accounts for the count, ``repeated_by_warpgroups`` names
    it instead."""
    s = e.stage
    counted = sum(e.tensor_paths.values())
    if not counted or not s.flops or counted < b.EXCESS_WORK * s.flops or e.memory_limited:
        return None
    ratio = counted / s.flops
    if _repeat(e) is not None:
        return None
    busy = s.tc_pct / 100.0 if s.tc_pct else 1.0  # the tensor pipe's active share of the time (1: not measured)
    pipe = f", the tensor pipe active {100.0 * busy:.0f}% of the time" if s.tc_pct else ""
    o = finding(
        e,
        f"Work beyond the model in {e.name}: ncu counted {ratio:.2f}x the plan's FLOPs on the tensor cores (padded "
        f"or masked-out tiles computed, or work repeated){pipe}",
        e.us * busy * (1.0 - s.flops / counted),
        (f"{e.name}.flops_over_model", f"{ratio:.2f}x"),
        f"compute only what {e.name}'s result keeps: skip tiles whose output is masked away (bound the loop or return "
        "early per CTA), tile shapes that divide the problem instead of padding it"
        f"{f' (now {e.config})' if e.config else ''}",
    )
    if not s.tc_pct:
        return o
    saved = "stage_us * tensor_pipe_pct / 100 * (1 - model_flops / counted_flops) * kernel_share"
    inputs = {"stage_us": e.us, "tensor_pipe_pct": s.tc_pct, "model_flops": s.flops, "counted_flops": counted}
    return o.model_copy(
        update={"formula": GAIN.format(saved=saved), "inputs": e.gain_inputs(**inputs, kernel_share=e.share)}
    )


@dataclass(frozen=True)
class _Repeat:
    groups: int  # warpgroups per CTA
    ratio: float  # tensor FLOPs done over those the model needs, from the compiled kernel
    counted: float | None  # the same ratio counted by ncu
    acc: int  # fp32 registers per thread one warpgroup needs to hold the fed product's whole accumulator
    half: int  # of which a warpgroup holds now (its share of that accumulator)
    fed: str  # the product the repeated one feeds, in words
    how: str  # how the repeat is known, in words


def _count_agrees(e: Evidence, ratio: float) -> tuple[bool, float | None]:
    """Where ncu counted tensor FLOPs, whether the count agrees with ``ratio`` (within REPEATED_MATCH)."""
    counted = sum(e.tensor_paths.values())
    by_count = counted / e.stage.flops if counted and e.stage.flops else None
    return by_count is None or abs(ratio / by_count - 1.0) <= b.REPEATED_MATCH, by_count


def _repeat_from_layouts(e: Evidence, dots: list[DotOp]) -> _Repeat | None:
    """From the TTGIR: a product whose accumulator layout puts more warpgroups along M than its rows fill
    (``DotOp.copies``): each of them computes it whole. FLOPs done over needed: sum(copies x FLOPs) / sum(FLOPs)."""
    groups = (e.warps or 0) // 4
    copied = [d for d in dots if d.copies > 1 and d.version == 3]
    if groups < 2 or not copied:
        return None
    ratio = sum(d.flops * d.copies for d in dots) / sum(d.flops for d in dots)
    agrees, by_count = _count_agrees(e, ratio)
    if not agrees:
        return None
    fed = max((d for d in dots if d.a_registers), key=lambda d: d.m * d.n, default=None)
    held = fed or max(copied, key=lambda d: d.flops)
    acc = held.m * held.n // (32 * 4)  # fp32 accumulators of the whole tile over one warpgroup's 128 threads
    first = max(copied, key=lambda d: d.flops)
    what = f"the {held.m} x {held.n} product at {held.line} (A in registers)" if fed else "it"
    how = (
        f"from the TTGIR's layouts: the {first.m} x {first.n} product at {first.line} lies over warpsPerCTA "
        f"{first.warps} (instrShape {first.instr}), {first.copies} copies"
    )
    return _Repeat(groups, ratio, by_count, acc, acc // max(1, fed.warps[1] if fed else 1), what, how)


def _repeat(e: Evidence) -> _Repeat | None:
    """A product every warpgroup of the CTA computes whole. Read from the compiled kernel's layouts (the TTGIR's
    dots) where the run recorded them. Without them (a record made before): a product chained into a wgmma that
    reads its A operand from registers, in a CTA of several warpgroups that split the second product (Triton gives a
    dot that feeds another dot all its warps along M), from the PTX's tensor FLOPs per warpgroup, f1 (A from shared
    memory: the first product) and f2 (A from registers: the second): the CTA does groups x (f1 + f2) where groups x
    f2 + f1 would do; known from the rows per CTA (the config's BLOCK_M) or, where ncu counted tensor FLOPs, from the
    count agreeing with that ratio (within REPEATED_MATCH)."""
    if e.dots is not None:
        return _repeat_from_layouts(e, e.dots)
    mix, groups = e.instructions, (e.warps or 0) // 4
    if mix is None or groups < 2:
        return None
    second = [o for o in mix.tensor_ops if o.op == "wgmma" and o.a_from == "registers" and o.dims]
    if not second:
        return None

    def flops(a_from: str) -> float:
        return sum(2.0 * math.prod(d) * o.count for o in mix.tensor_ops if o.a_from == a_from and (d := o.dims))

    f1, f2 = flops("shared"), flops("registers")
    if not f1 or not f2:
        return None
    ratio = groups * (f1 + f2) / (f1 + groups * f2)
    agrees, by_count = _count_agrees(e, ratio)
    rows = e.tile.get("BLOCK_M")
    if not agrees or (by_count is None and (not isinstance(rows, int) or rows >= b.WGMMA_M * groups)):
        return None
    wide = max(second, key=lambda o: o.dims[1] if o.dims else 0)
    n = wide.dims[1] if wide.dims else 0
    how = "expected from the PTX" + ("" if by_count is not None else f" and BLOCK_M={rows} (no TTGIR recorded)")
    return _Repeat(groups, ratio, by_count, groups * n // 2, n // 2, f"the register-operand wgmma {wide.shape}", how)


def repeated_by_warpgroups(e: Evidence) -> Opportunity | None:
    """The product every warpgroup repeats (``_repeat``): without the repeat the stage takes 1 / ratio of its time.
    The routes depend on registers: one warpgroup holding the fed product's whole accumulator (num_warps=4, or 64
    rows per warpgroup) needs ``acc`` fp32 registers per thread for it. Where that fits, the tile change first; past
    what a thread can hold no tile change reaches it, but a rewrite does (Gluon's layout, a runtime branch, the
    warpgroups exchanging the first product through memory): never structural, the change names each route with what
    it measured here."""
    rep = _repeat(e)
    if rep is None or e.memory_limited_doing(rep.ratio):  # the repeat counts where what executes is compute-bound
        return None
    counted = f", {rep.counted:.2f}x counted by ncu" if rep.counted is not None else ""
    now = f" (now {e.config})" if e.config else ""
    name = (
        f"Work repeated by warpgroups in {e.where}: each of its {rep.groups} warpgroups (num_warps={e.warps}) computes "
        f"the whole product that feeds {rep.fed}, which they split: {rep.ratio:.2f}x the model's tensor FLOPs "
        f"{rep.how}{counted}"
    )
    saved = e.us * (1.0 - 1.0 / rep.ratio)
    trigger = (f"{e.name}.repeated_tensor_work", f"{rep.ratio:.2f}x")
    if e.gluon:  # its layouts are written out: the repeat is the accumulator layout's warps_per_cta
        change = (
            f"compute that product once per CTA{now}: lay its accumulator (NVMMADistributedLayout warps_per_cta) "
            f"so the {rep.groups} warpgroups split its rows or columns instead of each holding it whole (as "
            f"{routes.GLUON_LAYOUT.split('(', 1)[1].removesuffix(')')}), or split its contraction between them and add "
            "the partial results through shared memory under an mbarrier"
        )
        return finding(e, name, saved, trigger, change)
    if rep.acc >= b.THREAD_REGISTERS:
        change = (
            f"no tile change removes it{now}: one warpgroup holding the fed product's whole accumulator (num_warps=4, "
            f"or {b.WGMMA_M} rows per warpgroup) needs {rep.acc} fp32 registers per thread for it alone "
            f"({b.THREAD_REGISTERS} the most; mla_decode v2 at d=512 on 4 warps spilled 316 registers and ran 475.9 "
            f"us against 258.8 on 8). Routes that reach it: {routes.GLUON_LAYOUT}; or {routes.RUNTIME_BRANCH}; or "
            f"{routes.EXCHANGE}"
        )
        return finding(e, name, saved, trigger, change)
    need = f", about {e.registers + rep.acc - rep.half:.0f} registers per thread" if e.registers else ""
    return finding(
        e,
        name,
        saved,
        trigger,
        f"compute that product once per CTA{now}: one warpgroup per block of rows (num_warps=4{need}: the whole "
        f"{rep.acc}-register accumulator in one warpgroup; {routes.ONE_WARPGROUP}), or a BLOCK_M of "
        f"{b.WGMMA_M * rep.groups} so that each warpgroup owns {b.WGMMA_M} rows; past the tile, {routes.GLUON_LAYOUT}",
    )


def fp64_math(e: Evidence) -> Opportunity | None:
    """FP64 arithmetic in a stage whose plan is in another precision (values converted to float64, a float64 constant
    or library call). Its cost: the FP64 instructions the kernel executes (the PTX's count in every thread of every
    CTA) at the SM's FP64 rate (conf/devices.json); named when that explains at least FP64_SHARE of the distance to the
    roof, the time saved being that FP64 time."""
    mix, s, lim = e.instructions, e.stage, e.limits
    if mix is None or not mix.fp64_math or s.precision == "fp64" or lim is None:
        return None
    executed = e.executed(mix.fp64_math)
    if executed is None or not lim.fp64_per_clock or not lim.sm_clock_mhz or not e.sm_count:
        return None
    fp64_us = executed / (lim.fp64_per_clock * e.sm_count * lim.sm_clock_mhz)  # instructions / (per us)
    if fp64_us < b.FP64_SHARE * e.gap_us:
        return None  # a little FP64 (an accumulator) that does not set the time
    return finding(
        e,
        f"FP64 arithmetic in {e.name} (plan precision {s.precision}): {mix.fp64_math} FP64 instructions per thread, "
        f"{executed:.3g} in all, take {fp64_us:.1f} us at the SM's FP64 rate of its {e.us:.1f} us",
        fp64_us,
        (f"{e.name}.fp64_instructions", f"{executed:.3g}"),
        f"keep {e.name}'s arithmetic in {s.precision}: no .to({'gl' if e.gluon else 'tl'}.float64), float32 "
        "constants and accumulators, libdevice calls on float32 values",
    )


def few_warps(e: Evidence) -> Opportunity | None:
    """CUDA-core arithmetic (no tensor instructions) on a compute-limited stage whose SMs hold fewer warps per
    scheduler than an FP32 FMA's dependent latency in cycles: a warp whose next FMA waits on its last issues once every
    that many cycles, and no other warp is there to fill the gaps (with one chain per thread). Up to the distance to
    the roof."""
    mix, lim, resident = e.instructions, e.limits, e.resident_ctas
    if mix is None or mix.tensor_ops or e.memory_limited or lim is None or not lim.schedulers:
        return None
    if not lim.fma_latency_cycles or not e.warps or resident is None or not mix.fp32_math:
        return None
    per_scheduler = resident * e.warps / lim.schedulers
    if per_scheduler >= lim.fma_latency_cycles:
        return None
    return finding(
        e,
        f"Too few warps to hide arithmetic latency in {e.name}: {resident * e.warps} warps per SM ({resident} CTA"
        f"{'s' if resident > 1 else ''} x {e.warps} warps), {per_scheduler:g} per scheduler, where a dependent FP32 "
        f"FMA waits {lim.fma_latency_cycles} cycles",
        e.gap_us,
        (f"{e.name}.warps_per_scheduler", f"{per_scheduler:g}"),
        f"give each of {e.name}'s schedulers at least {lim.fma_latency_cycles} independent instruction streams: more "
        "CTAs per SM (a grid of several CTAs per SM instead of a loop inside few), more warps per CTA, or more "
        + (
            f"independent elements per thread (size_per_thread in its layouts, {e.larger_blocks})"
            if e.gluon
            else f"independent elements per thread (a larger BLOCK){f' (now {e.config})' if e.config else ''}"
        ),
    )
