"""Atomic contention: global atomics that meet at one address serialize in L2, one every ``atomic_serial_ns``
(measured). Counted as they execute, not as they are written: the programs the GPU ran (``Evidence.ctas``) times the
atomics one program executes, read from the compiled kernel (TTGIR: a scalar atomic once per program, a block's one
per element, times its loop's trips), and the distinct addresses they hit (a pointer built from kernel arguments and
constants alone is one address for every program). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from kbench.analysis import bottleneck as b
from kbench.analysis.catalogue.evidence import Evidence, Opportunity, finding
from kbench.analysis.ttgir import AtomicOp


@dataclass(frozen=True)
class Contention:
    """The atomics of one call (a source line) as executed, and how long they take serialized."""

    executed: float  # atomics the kernel executes in all (at most, where masked)
    addresses: int  # distinct addresses they hit
    serial_us: float  # executed x atomic_serial_ns / addresses
    counted: str  # how the count was made, in words
    line: str  # the kernel's source line ("" where not known)
    scalar: bool


def _from_ttgir(e: Evidence, a: AtomicOp, programs: int, ns: float) -> Contention | None:
    """One call's contention from its TTGIR facts; None where its count or its addresses are not known."""
    each = a.per_program
    p = e.predicted
    traced = p.atomic_addresses.get(a.line) if p is not None and not a.one_address else None
    if each is None or not (a.one_address or traced):
        return None  # a loop of unknown trips, or addresses that differ by program, lane or data and were not traced
    addresses = traced if traced else 1
    what = "one scalar atomic per program" if a.scalar else f"{a.elements} per program, one per element of a block"
    if a.trips and a.trips > 1:
        what += f", x{a.trips} loop trips"
    if a.masked:
        what += " (masked: at most)"
    if a.lowered > 1:
        what += f"; {a.op}: {a.lowered} ops under exclusive masks, one executes"
    executed = float(programs * each)
    where = (
        "one address: a kernel argument's pointer, no program or lane offset"
        if a.one_address
        else f"{addresses} distinct addresses predicted on CPU {p.where if p else ''}"
    )
    counted = f"{programs} programs x {what} (TTGIR); {where}"
    return Contention(executed, addresses, executed * ns / 1e3 / addresses, counted, a.line, a.scalar)


def _from_ptx(e: Evidence, ns: float) -> Contention | None:
    """Without the TTGIR (a record made before it was kept): the PTX's atomics per thread, where a block's atomics
    put two or more in every thread, each thread's count in every thread of every program, taken as one address."""
    mix = e.instructions
    if mix is None or mix.atomics - mix.one_thread_atomics < b.PER_ELEMENT_ATOMICS or not e.warps or not e.ctas:
        return None
    per_thread = mix.atomics - mix.one_thread_atomics
    executed = float(per_thread * e.warps * 32 * e.ctas + mix.one_thread_atomics * e.ctas)
    counted = (
        f"{per_thread} per thread in the PTX x {e.warps * 32} threads x {e.ctas} programs (no TTGIR recorded: taken as "
        "one address, as the PTX does not say which)"
    )
    return Contention(executed, 1, executed * ns / 1e3, counted, "", False)


def contended(e: Evidence) -> Contention | None:
    """The call whose atomics take the longest serialized."""
    ns = e.atomic_serial_ns
    if not ns:
        return None
    if e.atomics is None:
        return _from_ptx(e, ns)
    if not e.ctas:
        return None
    found = [c for a in e.atomics if (c := _from_ttgir(e, a, e.ctas, ns)) is not None]
    return max(found, key=lambda c: c.serial_us, default=None)


def contention(e: Evidence) -> Opportunity | None:
    """Named when the atomics, serialized at their addresses, take at least ATOMIC_SERIAL_SHARE of the kernel's time.
    The fixed kernel reduces on chip and issues one atomic per program or writes partial results: it needs the
    kernel's other work (its time beyond the serialized atomics) or its roof time, whichever is longer."""
    c = contended(e)
    if c is None or c.serial_us < b.ATOMIC_SERIAL_SHARE * e.kernel_us:
        return None
    floor = max(e.kernel_us - c.serial_us, (e.bound_us or 0.0) * e.share)
    at = f" at {c.line}" if c.line else ""
    lang = "gl" if e.gluon else "tl"
    if c.scalar:
        now = f" (now {e.config})" if e.config else ""
        change = (
            f"make each program of {e.where} reduce more on chip before its one atomic{at}: a larger BLOCK or a loop "
            f"over several blocks, so that fewer programs meet at the address{now}; or write one partial result per "
            "program and reduce them in a second small kernel; or spread the atomics over k addresses (out[pid % k]) "
            "and sum those k"
        )
    else:
        change = (
            f"reduce on chip first in {e.where}{at}: {lang}.sum over the block, then one {lang}.atomic_add per "
            "program (or per output element), or write per-program partial results and reduce them in a second "
            "small kernel"
        )
    return finding(
        e,
        f"Atomic contention in {e.where}{at}: {c.executed:.3g} atomics executed at {c.addresses} "
        f"address{'es' if c.addresses > 1 else ''} take {c.serial_us:.0f} us serialized ({e.atomic_serial_ns:g} ns "
        f"each) of the kernel's {e.kernel_us:.0f} us; counted as {c.counted}",
        e.kernel_us - floor,
        (f"{e.name}.global_atomics_executed", f"{c.executed:.3g}"),
        change,
        whole_stage=True,  # the saving is already the kernel's own time
        at=c.line or None,
    )
