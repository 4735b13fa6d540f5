"""What an mbarrier wait waits for, read from the kernel's own source lines (the line model's code): the barrier the
wait line names (its first argument, ``bars.index(X_SUM)``) and what completes its phase, from the other lines that
name the same barrier: TMA copies (an ``mbarrier.expect`` of their bytes, or a copy given the barrier) or other
warps' ``mbarrier.arrive``. Where no executed line names the barrier as the wait writes it (it reaches a helper as a
parameter), a kernel whose only arrivals are copies' is read as waiting for copies, and otherwise what completes it
is not known: no item then calls it a copy. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from kbench.analysis.lines import Line, LineModel

WAIT = "mbarrier.wait("
ARRIVE = "mbarrier.arrive("
# what a TMA copy's completion looks like in the source: the expected bytes, or the copy handed the barrier
COPY = ("mbarrier.expect(", "expect_tx", "async_copy_global_to_shared(", "async_load(", "_tma_load(", "tma.")
SHOWN = 2  # arriving lines an item quotes


def _flat(code: str) -> str:
    return "".join(code.split())


def first_argument(code: str, call: str = WAIT) -> str | None:
    """The first argument of ``call`` on a line (``mbarrier.wait(bars.index(X_SUM), j & 1)`` -> ``bars.index(X_SUM)``),
    None where the line makes no such call."""
    at = code.find(call)
    if at < 0:
        return None
    depth, start = 0, at + len(call)
    for i, ch in enumerate(code[start:], start):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return code[start:i].strip() or None
            depth -= 1
        elif ch == "," and depth == 0:
            return code[start:i].strip() or None
    return None


def _kind(code: str) -> str | None:
    if ARRIVE in code:
        return "arrive"
    if any(c in code for c in COPY):
        return "copy"
    return None


@dataclass(frozen=True)
class Barrier:
    """The mbarrier a wait line waits on and what completes it."""

    name: str  # as the wait line writes it
    by: str  # "copy" (TMA copies' bytes), "arrive" (other warps' mbarrier.arrive) or "" (not known)
    lines: tuple[Line, ...]  # the executed lines that complete it (or, read by kind, the kernel's copies)
    named: bool = True  # those lines name the barrier as the wait does (False: read from the kernel's only kind)

    def words(self) -> str:
        """``the mbarrier `bars.index(X_SUM)`, which other warps' arrive completes (v8.py:93 `...`)``."""
        quoted = "; ".join(x.quoted for x in self.lines[:SHOWN])
        if self.by == "arrive":
            return f"the mbarrier `{self.name}`, which other warps' arrive completes ({quoted})"
        if self.by == "copy":
            how = "" if self.named else ", the only arrivals this kernel makes"
            return f"the mbarrier `{self.name}`, which TMA copies complete ({quoted}{how})"
        return f"the mbarrier `{self.name}` (no executed line shows what completes it)"


def awaited(x: Line, model: LineModel) -> Barrier | None:
    """The barrier wait line ``x`` waits on and what completes it; None where ``x`` is no mbarrier wait."""
    name = first_argument(x.code)
    if name is None:
        return None
    mine = _flat(name)
    others = [y for y in model.lines if y is not x and WAIT not in y.code and "mbarrier.init(" not in y.code]
    naming = [(y, k) for y in others if mine in _flat(y.code) and (k := _kind(y.code)) is not None]
    for kind in ("arrive", "copy"):
        found = tuple(y for y, k in naming if k == kind)
        if found and all(k == kind for _, k in naming):
            return Barrier(name, kind, found)
    if naming:  # both kinds name it: not one story to tell
        return Barrier(name, "", ())
    kinds = {k: y for y in others if (k := _kind(y.code)) is not None}
    if set(kinds) == {"copy"}:  # every arrival in the kernel is a copy's, through a helper's parameter
        return Barrier(name, "copy", tuple(y for y in others if _kind(y.code) == "copy"), named=False)
    return Barrier(name, "", ())
