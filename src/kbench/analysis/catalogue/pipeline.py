"""The asynchronous-copy family: warps waiting at an mbarrier for the copies (TMA bulk copies) that fill the shared-
memory stage they are about to read. Gluon kernels write their pipelines by hand (Triton's TMA pipelines too have
them): a stage can be refilled only when its last reader is done, so a loop that refills it right before the next
wait, or has too few stages for the copies' latency, leaves the consumers waiting. Read from the source lines'
warp-state samples (annotation and ncu modes): an mbarrier wait compiles to SYNCS.PHASECHK (a try-wait in a retry
loop), and its samples land on that line, whatever stall reason they carry. Pure.

Gain model: the time the warps spend at the wait, its line's share of the kernel's warp-state samples times the
kernel's time (with each copy landed before its wait, the wait costs nothing). Named where that share is at least
WAIT_SHARE and the stage is neither memory-bound (there the copies are the work) nor within HEALTHY_GAP of its roof;
in a warp-specialized kernel, only where the share is more than its smallest partition's warps could hold alone (a
copying warp waiting for its consumers to release a stage is ahead of them, not starving them).
Validated pair: mla_decode v7_fa3 -> v7 on an H100 (tests/data/validation_h100_gluon): the wait held 21.7% of the
samples, the reordered loop took 19.7% less time.
"""

from __future__ import annotations

from kbench.analysis.catalogue.barriers import awaited
from kbench.analysis.catalogue.evidence import Evidence, Opportunity, finding
from kbench.analysis.catalogue.lines import HEALTHY_GAP, MBARRIER_WAIT, waited
from kbench.analysis.lines import Line

WAIT_SHARE = 0.10  # an mbarrier wait holding this share of the kernel's warp-state samples is named


def waiting(e: Evidence) -> Line | None:
    """The mbarrier wait the stage's warps spend most time at, where it is worth an item (else None)."""
    model = e.lines
    if model is None or model.static or e.memory_limited or e.gap_us < HEALTHY_GAP * e.us:
        return None
    waits = [x for x in model.lines if any(op.startswith(MBARRIER_WAIT) for op in x.opcodes)]
    x = max(waits, key=model.time_share, default=None)
    if x is None or model.time_share(x) < WAIT_SHARE:
        return None
    # warp-specialized: a wait one partition alone could hold is no starvation (a producer waiting for its consumers
    # to release a stage is ahead of them)
    alone = min(e.partition_warps) / (e.warps or sum(e.partition_warps)) if e.partition_warps else 0.0
    return x if model.time_share(x) > alone else None


def starved(e: Evidence) -> Opportunity | None:
    """Warps waiting at an mbarrier, named by what completes it (kbench.analysis.catalogue.barriers): consumers
    waiting for the copies that fill their next stage (the pipeline starved), or for other warps' arrive."""
    x = waiting(e)
    if x is None or e.lines is None:
        return None
    share = e.lines.time_share(x)
    b = awaited(x, e.lines)
    held = ""
    if e.shared_bytes and e.limits is not None:
        held = f"; its CTA holds {e.shared_bytes:.0f} of the {e.limits.shared_bytes} bytes of shared memory an SM gives"
    holds = (
        f"line {x.where}{f' `{x.code}`' if x.code else ''} holds {100 * share:.1f}% of {e.lines.kernel}'s "
        "warp-state samples"
    )
    trigger = (f"{e.name}.mbarrier_wait_share", f"{100 * share:.1f}%")
    if b is not None and b.by == "arrive":
        return finding(
            e,
            f"Warps wait for other warps in {e.where}: at {b.words()}; {holds}",
            e.us * share,
            trigger,
            waited(x, e.lines).change,
            at=x,
        )
    if b is not None and not b.by:
        return finding(e, f"Warps wait at an mbarrier in {e.where}: {b.words()}; {holds}", e.us * share, trigger,
                       waited(x, e.lines).change, at=x)  # fmt: skip
    at = f", at {b.words()}" if b is not None else ""
    return finding(
        e,
        f"Pipeline starved in {e.where}: warps wait for the asynchronous copies (TMA) that fill their next stage"
        f"{at}; {holds}",
        e.us * share,
        trigger,
        "issue the copy this wait is for earlier: a stage is refilled only when its last reader (the MMA that reads "
        "it) is done, so put a whole MMA between that refill and this wait (issue this tile's MMA that frees the "
        "stage first, e.g. P.V of tile j before Q.K^T of tile j+1, and refill right after it), or hold more, smaller "
        f"stages{held}",
        at=x,
    )
