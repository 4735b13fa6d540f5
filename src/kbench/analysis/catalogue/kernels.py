"""The kernels family: what the GPU ran inside a stage against what the plan declares (a kernel the plan does not
name taking a share of the stage) and the host's time inside a stage (event mode: CUDA events against CUPTI's
kernel sum, with the runtime/driver API calls that explain it). Pure.

Host time is not inside a stage's Duration where CUPTI timed it (Duration is then the kernels' GPU time), so its
gain is not capped by the distance to the roof (which bounds kernel time): it is the gap as a share of the plan's
time with this stage counted at its CUDA-event time, the time a caller of the stage waits.
"""

from __future__ import annotations

from kbench.analysis.catalogue.evidence import Evidence, Opportunity, finding
from kbench.analysis.census import TRITON
from kbench.analysis.kernels import StageKernel, counted

UNDECLARED_PCT = 10.0  # an undeclared kernel's share of its stage that makes it an item
HOST_PCT = 10.0  # host time's share of a stage's CUDA-event time that makes it an item (with host work recorded)
# PyTorch ops that convert, copy or lay out a tensor again, and those that fill one
CONVERTS = ("aten::to", "aten::_to_copy", "aten::copy_", "aten::contiguous", "aten::clone", "aten::type_as")
FILLS = ("aten::fill_", "aten::zero_", "aten::zeros", "aten::ones", "aten::full", "aten::new_zeros", "aten::new_full")


def _ops(op: str | None) -> list[str]:
    return [o.strip() for o in (op or "").split(">")]


def _is(op: str | None, names: tuple[str, ...]) -> bool:
    return any(o in names or o.removesuffix("_like") in names for o in _ops(op))


def _undeclared_change(e: Evidence, k: StageKernel) -> str:
    """What the op that launched ``k`` does on every run of the stage, and the cheaper way, in the plan's terms."""
    op = k.op
    if k.name.startswith("Memcpy"):
        return (
            f"`{op or 'a copy'}` moves data between host and device on every run of {e.name}: keep the data on the "
            "device (no .item(), .cpu(), .tolist() or host tensor inside the launch function), or move the copy to "
            "the plan's setup"
        )
    if k.name.startswith("Memset") or _is(op, FILLS):
        return (
            f"`{op or 'a memset'}` fills a buffer on every run of {e.name}: fill it once in the plan's setup when "
            "its content does not change, else write the initial values inside the kernel (start the accumulator in "
            "registers, store where the kernel first writes) instead of a separate fill"
        )
    if _is(op, CONVERTS):
        return (
            f"`{op}` converts or copies a tensor on every run of {e.name}: do it once in the plan's setup (hand the "
            "kernel the tensor in the dtype and layout it reads), or read the original inside the kernel and convert "
            f"in its loads (`{'gl' if e.gluon else 'tl'}.load(...).to(...)`, its strides instead of .contiguous())"
        )
    if op == TRITON:
        return (
            f"a Triton kernel Stage.kernels does not name: add {k.short} there if it is the plan's own; else fuse its "
            f"work into {e.name}'s kernel"
        )
    if op:
        return (
            f"`{op}` runs as a kernel of its own on every run of {e.name}: fuse its work into the plan's kernel (in "
            "its loads or epilogue), or compute it once in the plan's setup when its result does not change"
        )
    return (
        f"find what launches {k.short} in {e.name}'s launch function (--prof_type=nsys shows its API call) and fuse "
        "it into the plan's kernel or move it to the plan's setup"
    )


def undeclared(e: Evidence) -> Opportunity | None:
    """A kernel the plan does not declare takes UNDECLARED_PCT of the stage or more (the largest such one; only where
    the plan declares its kernels): removing it saves its time."""
    ks = e.kernels
    if ks is None:
        return None
    found = [k for k in ks.kernels if k.declared is False and (k.share_pct or 0.0) >= UNDECLARED_PCT]
    if not found:
        return None
    k = found[0]  # the kernels come largest first
    share = k.share_pct or 0.0
    by = f", launched by {k.op}" if k.op and k.op != TRITON else (", a Triton launch (no PyTorch op)" if k.op else "")
    more = f"; {len(found) - 1} more undeclared over {UNDECLARED_PCT:g}%" if len(found) > 1 else ""
    return finding(
        e,
        f"Kernel {k.short} is not the plan's: {share:.0f}% of {e.name} ({k.us or 0.0:.1f} us and "
        f"{k.launches:g} launch{'' if k.launches == 1 else 'es'} per run{by}){more}",
        e.us * share / 100.0,
        (f"{e.name}.undeclared_kernel_pct", f"{share:.1f}%"),
        _undeclared_change(e, k),
        whole_stage=True,
    )


def host_time(e: Evidence) -> Opportunity | None:
    """The stage's CUDA-event time exceeds its kernels' GPU time by HOST_PCT or more AND its API calls show host work
    (a synchronization, a copy between host and device, an allocation). Without such work the gap is the event
    timer's fixed cost and the GPU's launch latency (one healthy kernel: 223 against 199 us on an H100), no item."""
    h = e.kernels.host if e.kernels is not None else None
    if e.kernels is None or h is None or h.gap_pct < HOST_PCT:
        return None
    work = e.kernels.host_work()
    if not (work["synchronizations"] or work["host-device copies"] or work["allocations"]):
        return None
    did = counted(work)
    changes = []
    if work["synchronizations"] or work["host-device copies"]:
        changes.append(
            "keep the stage on the device: a value read back (.item(), .cpu(), .tolist(), a Python `if` on a tensor) "
            "makes the host wait for the GPU, which then idles while the launches after it are made; pass the tensor "
            "to the next kernel (a device-side bound or mask) or read it once after the stage"
        )
    if work["allocations"]:
        changes.append("allocate the stage's buffers once in the plan's setup, not inside its launch function")
    return Opportunity(
        name=f"Host time inside {e.name}: {h.gap_us:.1f} us per run ({h.gap_pct:.0f}% of its {h.events_us:.1f} us "
        f"by CUDA events) outside its kernels' {h.kernels_us:.1f} us (CUPTI); per run: {did}",
        gain_pct=100.0 * h.gap_us / (e.total_us + h.gap_us),
        metric=f"{e.name}.host_gap_pct",
        value=f"{h.gap_pct:.1f}%",
        change="; ".join(changes),
        named=True,
        stage=e.name,
        kernel=e.kernel_name,
        formula="100 * host_gap_us / (total_us + host_gap_us)",
        inputs={"host_gap_us": h.gap_us, "total_us": e.total_us},
    )
