"""The memory family: DRAM traffic beyond the compulsory bytes, global accesses that waste sectors, lanes masked off
at the loads and stores, more memory touched than the model says, too few bytes in flight for the DRAM's latency
(atomics meeting at one address: ``atomics``). Pure.

Where an access run traced the stage's loads and stores on a CPU (``Evidence.predicted``), the uncoalesced entry
names the worst line and, without ncu's counts, stands on the prediction alone, saying "predicted on CPU"; masked
lanes and memory beyond the model come from the prediction only."""

from __future__ import annotations

from kbench.analysis import bottleneck as b
from kbench.analysis.catalogue.atomics import contention
from kbench.analysis.catalogue.evidence import Evidence, Opportunity, finding
from kbench.analysis.catalogue.exchange import exchanged_bytes


def excess_traffic(e: Evidence) -> Opportunity | None:
    """DRAM bytes counted beyond the model's, less those an intermediate between two of its kernels moves (the
    exchange item's). Where an access run predicts the loads and stores reach as many more
    distinct bytes, the extra is data the result does not need (not data fetched twice), and the item says so."""
    s, p = e.stage, e.predicted
    moved = (e.moved_bytes or 0.0) - exchanged_bytes(e)  # an intermediate two kernels pass: exchange.exchanged's
    if moved <= 0 or not s.dram_bytes or moved < b.EXCESS_TRAFFIC * s.dram_bytes:
        return None
    if s.bottleneck != "Memory":
        return None  # the extra bytes cost time only where DRAM sets it
    ratio = moved / s.dram_bytes
    extra = p is not None and p.beyond_model is not None and p.beyond_model >= b.EXCESS_TRAFFIC
    why = "data is fetched more than once"
    change = (
        f"make {e.name} read each input once: larger tiles or a GROUP_M-style swizzle so neighbouring CTAs "
        "share tiles in L2, or fuse the passes that re-read the same data"
    )
    if extra and p is not None and p.beyond_model is not None:
        why = (
            f"its loads and stores reach {p.beyond_model:.2f}x the model's bytes (predicted on CPU {p.beyond_where}): "
            "it moves data the result does not need"
        )
        change = TOUCH_LESS.format(name=e.name)
    return finding(
        e,
        f"DRAM traffic in {e.name} is {ratio:.2f}x the compulsory bytes: {why}",
        e.us * (1.0 - s.dram_bytes / moved),
        (f"{e.name}.dram_bytes_over_model", f"{ratio:.2f}x"),
        change,
    )


TOUCH_LESS = (
    "read and write only what {name}'s result needs (no padding or halo reads, no scratch round trips), or "
    "correct the plan's FLOP/byte model if it leaves a tensor out"
)


def _predicted_words(e: Evidence) -> str:
    """Where the prediction comes from, and the configuration it traced where this run's differs (masked lanes and
    reuse depend on the block sizes)."""
    p = e.predicted
    if p is None:
        return ""
    other = ""
    if p.config and e.tile and {k: str(v) for k, v in p.config.items()} != {k: str(v) for k, v in e.tile.items()}:
        other = f"; traced with {', '.join(f'{k}={v}' for k, v in p.config.items())}, not this run's"
    return f" (predicted on CPU {p.where}{other})"


def uncoalesced(e: Evidence) -> Opportunity | None:
    """Global loads or stores that use few bytes of each 32-byte sector they touch; coalesced, the same data
    takes (used / 32) of the sectors. Counted by ncu, the wasted sectors' bytes cost the stage their share of all the
    bytes it moves (these sectors, or the DRAM bytes counted, or the model's: whichever is most; a kernel fed by TMA
    moves its tiles outside these counts) and at most their own time at the practical DRAM rate; predicted on CPU
    (a sample of the programs), the wasted share of the sectors. Capped by the roof; the prediction names the line
    either way."""
    p = e.predicted
    counted = any(v is not None for v in (e.ld_use, e.st_use))
    ld = (e.ld_sectors, e.ld_use) if counted or p is None else (p.ld_sectors, p.ld_use)
    st = (e.st_sectors, e.st_use) if counted or p is None else (p.st_sectors, p.st_use)
    if counted and p is not None:  # ncu counted a kind whose lines the trace saw only as one lane each (a scalar a
        ld = ld if p.ld_sectors is not None else (None, None)  # program stores): no coalescing question there
        st = st if p.st_sectors is not None else (None, None)
    kinds = [(what, sectors, use) for what, (sectors, use) in (("loads", ld), ("stores", st)) if sectors and use]
    if not kinds:
        return None
    what, _, worst = min(kinds, key=lambda k: k[2])
    if worst >= b.COALESCED_BYTES_PER_SECTOR:
        return None
    total = sum(sectors for _, sectors, _ in kinds)
    needed = sum(sectors * use / b.SECTOR_BYTES for _, sectors, use in kinds)
    saved = e.us * (1.0 - needed / total)
    if counted:  # the stage's own counts (a CPU trace's sectors are a sample of its programs': only their ratio holds)
        wasted = b.SECTOR_BYTES * (total - needed)
        saved = e.us * wasted / max(b.SECTOR_BYTES * total, e.moved_bytes or 0.0, e.stage.dram_bytes or 0.0)
        if e.practical is not None and e.practical.gbps:
            saved = min(saved, wasted / (e.practical.gbps * 1e3))  # GB/s x 1e3: bytes per us
    op = "ld" if what == "loads" else "st"
    line = ""
    if p is not None and p.worst is not None and (p.worst.bytes_per_sector or 32.0) < b.COALESCED_BYTES_PER_SECTOR:
        w = p.worst
        line = (
            f"; worst line {w.line} ({w.kind}, neighbouring lanes {w.stride_bytes} B apart, "
            f"{w.bytes_per_sector:.1f} B per sector, predicted on CPU)"
        )
    said = "" if counted else _predicted_words(e)
    return finding(
        e,
        f"Uncoalesced global {what} in {e.name}: {worst:.1f} of every 32 bytes they fetch are used{said}{line}",
        saved,
        (f"{e.name}.global_{op}_bytes_per_sector{'' if counted else '_predicted'}", f"{worst:.1f}"),
        f"make neighbouring threads of {e.name} touch neighbouring addresses"
        f"{f' at {p.worst.line}' if line and p and p.worst else ''}: "
        + (
            "a layout whose fastest dimension (a BlockedLayout's order) is the contiguous one, 16 bytes per thread "
            "(size_per_thread), or TMA copies through tensor descriptors; transpose on chip (permute a shared-memory "
            "tile) instead of loading across the stride, or store the tensor in the layout the kernel walks"
            if e.gluon
            else "index the contiguous dimension with the fastest-varying tl.arange (load tiles row by row and "
            "transpose them on chip with tl.trans), or store the tensor in the layout the kernel walks"
        ),
        at=p.worst.line if line and p and p.worst else None,
    )


def masked_lanes(e: Evidence) -> Opportunity | None:
    """Lanes masked off at a stage's loads and stores (predicted on a CPU) are threads that do no work: on a stage the
    arithmetic or the lanes' latency limits (not DRAM: masked lanes move no bytes, and on a memory-limited stage
    they show as fewer bytes in flight instead), the stage's time shrinks with the lanes it wastes."""
    p = e.predicted
    if p is None or p.masked_pct < b.MASKED_LANES_PCT or p.most_masked is None or e.memory_limited:
        return None
    m = p.most_masked
    return finding(
        e,
        f"Masked lanes in {e.name}: {p.masked_pct:.0f}% of the lanes at its loads and stores do no work "
        f"({m.masked_pct:.0f}% at {m.line}, {m.kind}){_predicted_words(e)}",
        e.us * p.masked_pct / 100.0,
        (f"{e.name}.masked_lanes_pct_predicted", f"{p.masked_pct:.1f}"),
        f"size {e.name}'s blocks to the data{f' (now {e.config})' if e.config else ''}: a BLOCK no larger than the "
        "dimension it covers (loop over a long one in smaller blocks), and no programs whose lanes are all masked "
        "(a grid of cdiv(size, BLOCK))",
        at=m.line,
    )


def touched_beyond_model(e: Evidence) -> Opportunity | None:
    """The stage's loads and stores reach more distinct bytes than the plan's model says it must move (every program
    traced on a CPU: at the traced point, else at the check parameters, where the kernel's code reads what it reads
    at any size): data it need not read or write, where DRAM sets the time."""
    p = e.predicted
    if p is None or p.beyond_model is None or not e.memory_limited or p.beyond_model < b.EXCESS_TRAFFIC:
        return None
    if e.moved_bytes is not None:
        return None  # ncu counted the DRAM bytes: the excess-traffic item names them, with this prediction's reason
    ratio = p.beyond_model
    return finding(
        e,
        f"Memory beyond the model in {e.name}: its loads and stores reach {ratio:.2f}x the bytes the plan's model "
        f"moves (predicted on CPU {p.beyond_where})",
        e.us * (1.0 - 1.0 / ratio),
        (f"{e.name}.distinct_bytes_over_model_predicted", f"{ratio:.2f}x"),
        TOUCH_LESS.format(name=e.name),
    )


def in_flight(e: Evidence) -> tuple[float, str] | None:
    """Bytes of global loads one SM has in flight, from the compiled kernel: each thread's global loads and cp.async
    copies as written in its PTX (static: a loop body's loads, issued before their first use), times 32 threads,
    the CTA's warps and the CTAs an SM holds at once (the occupancy calculator's, or fewer where the grid is
    smaller); and how that product is made up. None where the kernel's loads are not known (TMA boxes are not in
    the PTX)."""
    mix, warps, resident = e.instructions, e.warps, e.resident_ctas
    if mix is None or not warps or resident is None or mix.tma_loads:
        return None
    loads = {**mix.global_loads}
    for w, n in mix.cp_async.items():
        loads[w] = loads.get(w, 0) + n
    per_thread = sum(w * n for w, n in loads.items())
    if not per_thread:
        return None
    each = " + ".join(f"{n} x {w} B" if n > 1 else f"{w} B" for w, n in sorted(loads.items()))
    words = (
        f"{resident} CTA{'s' if resident > 1 else ''} x {warps} warp{'s' if warps > 1 else ''} x 32 threads x "
        f"{each} of loads"
    )
    active = 1.0
    p = e.predicted
    if p is not None and p.load_masked_pct >= b.MASKED_LANES_PCT:  # masked lanes load nothing
        active = 1.0 - p.load_masked_pct / 100.0
        words += f" x {active:.2f} of the lanes active (predicted on CPU)"
    return float(resident * warps * 32 * per_thread) * active, words


def few_bytes_in_flight(e: Evidence) -> Opportunity | None:
    """Little's law: DRAM delivers bandwidth x latency bytes only if that many are requested and not yet returned.
    An SM whose warps have fewer loads in flight caps the stage at (bytes in flight x SMs / latency); on a
    memory-limited stage whose measured bandwidth sits under that cap's reach, more bytes in flight is what lifts it
    toward the practical roof."""
    c, s = e.practical, e.stage
    if c is None or not e.dram_latency_ns or not e.sm_count or not s.dram_bytes or not e.memory_limited:
        return None
    flight = in_flight(e)
    if flight is None:
        return None
    per_sm, words = flight
    needed = b.IN_FLIGHT_ENOUGH * c.gbps * e.dram_latency_ns / e.sm_count  # GB/s x ns = bytes
    reach = per_sm * e.sm_count / e.dram_latency_ns  # GB/s at the idle latency: an upper bound
    achieved = s.dram_bytes / (e.us * 1e3)  # GB/s
    if per_sm >= needed or achieved > b.IN_FLIGHT_MODEL_SLACK * reach:
        return None  # enough in flight, or the kernel moves more than the static count allows (the model misses)
    if contention(e) is not None:
        return None  # atomics serialized at one address set the time, not the loads (the contention item says it)
    return finding(
        e,
        f"Too few bytes in flight in {e.name}: {per_sm / 1024:.1f} KiB per SM ({words}) where {c.gbps:g} GB/s "
        f"needs about {needed / 1024:.1f} KiB ({b.IN_FLIGHT_ENOUGH:g}x bandwidth x the {e.dram_latency_ns:.0f} ns "
        f"DRAM latency, Little's law); measured {achieved:.0f} GB/s",
        e.gap_us,
        (f"{e.name}.bytes_in_flight_per_sm", f"{per_sm:.0f}"),
        f"give each SM of {e.name} at least {needed / 1024:.0f} KiB of loads in flight: more elements per thread "
        "per iteration (a larger BLOCK, 16-byte loads), more warps per CTA, and a grid of several CTAs per SM "
        f"instead of a loop inside few CTAs{f' (now {e.config})' if e.config else ''}",
    )
