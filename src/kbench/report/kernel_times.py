"""Why a stage's kernels (report.md's Kernels table) and its Duration can give the stage two times: they come from
two measurements. Event mode's table is the census (kbench.capture.census: the stage run a few times back to back
after its timings, no L2 flush between runs), its Duration the CUPTI timing (L2 flushed before each repetition); nsys
mode's table sums the kernels' own GPU time, its Duration spans the first kernel's start to the last one's end. A
stage whose kernels sum outside the range of its Duration's own repetitions gets a line saying so and why. Pure."""

from __future__ import annotations

from kbench.analysis.kernels import StageKernels
from kbench.analysis.stages import StageFigures

ROUNDED = 0.005  # half of the last digit the report writes a time in (us, two decimals)
WHY = {
    "event": "the table is the census, the stage run back to back after its timings without the L2 flush (and the "
    "rest, on unlocked clocks) each of the Duration's repetitions (CUPTI timing) starts with: its kernels find in L2 "
    "what the run before left there, at the clock back-to-back work holds; the Duration is the stage's time in Top 3 "
    "and the Roofline",
    "nsys": "the table sums the kernels' own GPU time, the Duration spans its first kernel's start to its last one's "
    "end (the gaps between them counted, kernels overlapping one another counted once)",
}
APART = "the table and the Duration are separate measurements; the Duration is the stage's time in Top 3"


def summed(sk: StageKernels) -> float | None:
    """The stage's kernels' time per run, as the table lists them (None where none was timed)."""
    times = [k.us for k in sk.kernels if k.us is not None]
    return sum(times) if times else None


def differs(sk: StageKernels, s: StageFigures, mode: str) -> str | None:
    """The line for a stage whose kernels sum outside its Duration's range (None where they agree)."""
    total = summed(sk)
    t = s.timing
    if total is None or t.n == 0:
        return None
    slack = ROUNDED * (len(sk.kernels) + 1)
    if t.min_us - slack <= total <= t.max_us + slack:
        return None
    over = "" if t.n == 1 else f" ({t.min_us:.2f}-{t.max_us:.2f} us over its {t.n} repetitions)"
    return (
        f"{s.name}: its kernels above sum to {total:.2f} us against the {s.duration_us:.2f} us Duration{over}: "
        f"{WHY.get(mode, APART)}"
    )


def lines(kernels: list[StageKernels], stages: list[StageFigures], mode: str) -> dict[str, str]:
    """Per stage whose two times differ, its line."""
    by_name = {s.name: s for s in stages}
    out = {}
    for sk in kernels:
        if sk.stage in by_name and (line := differs(sk, by_name[sk.stage], mode)) is not None:
            out[sk.stage] = line
    return out
