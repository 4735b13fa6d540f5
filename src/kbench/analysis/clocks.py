"""What the clock samples taken during a measurement say: the SM clock's range and the clock-event (throttle)
reasons the GPU reported, and whether the measurement can be trusted. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from kbench.analysis.bottleneck import CLOCK_DRIFT_PCT, CLOCK_SAG_PCT, IDLE_CLOCK_FRACTION
from kbench.model import Model

# NVML's clock-event reason bits (nvmlClocksEventReason*; nvidia-smi's clocks_event_reasons.active)
REASONS: dict[int, str] = {
    0x1: "GPU idle",
    0x2: "applications clocks setting",
    0x4: "power cap",
    0x8: "HW slowdown",
    0x10: "sync boost",
    0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake",
    0x100: "display clock setting",
}
# the reasons that mean the GPU ran slower than its clocks allow
SLOWDOWN = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
# an idle GPU drops its clocks: such samples say nothing about the clocks the kernels ran at
IDLE = 0x1


@dataclass(frozen=True)
class Reading:
    """One sample: SM and memory clock in MHz and the active clock-event reason bits (None: not readable)."""

    sm_mhz: int | None
    mem_mhz: int | None = None
    reasons: int | None = None
    t: float | None = None  # when it was taken (time.monotonic(), seconds): places it in a stage's timed window


class ClockSummary(Model):
    state: str  # how the clocks were held: "locked by kbench at 1590 MHz", "not locked (--no-lock-clocks)", ...
    samples: int
    idle_samples: int  # taken while the GPU idled (its clock then drops); left out of the SM range
    sm_min_mhz: int | None
    sm_max_mhz: int | None
    sm_median_mhz: float | None
    drift_pct: float | None  # (max - min) / median
    reasons_pct: dict[str, float]  # each reason seen: the share of samples it was active in
    unstable: bool
    why_unstable: list[str]

    def line(self) -> str:
        """E.g. 'not locked (--no-lock-clocks); SM 1590-1660 MHz over 812 samples; power cap active in 84% of
        samples; measurement unstable: ...'."""
        parts = [self.state]
        idle = f" ({self.idle_samples} idle samples left out)" if self.idle_samples else ""
        if self.sm_min_mhz is None:
            why = "the GPU idled throughout" if self.idle_samples else "no NVML or nvidia-smi reading"
            parts.append(f"SM clock not sampled while busy ({why})")
        else:
            busy = self.samples - self.idle_samples
            parts.append(f"SM {self.sm_min_mhz}-{self.sm_max_mhz} MHz over {busy} busy samples{idle}")
        parts += [f"{name} active in {pct:.0f}% of samples" for name, pct in self.reasons_pct.items()]
        if self.unstable:
            parts.append("measurement unstable: " + ", ".join(self.why_unstable))
        return "; ".join(parts)


def _awake(r: Reading) -> bool:
    """Taken while the GPU was not idle (its reasons unknown counts as awake)."""
    return r.reasons is None or not r.reasons & IDLE


def _slowdowns(samples: Sequence[Reading]) -> list[str]:
    """The slowdown reasons (power, thermal) active in any of the samples."""
    bits = [r.reasons for r in samples if r.reasons is not None]
    return [REASONS[b] for b in REASONS if b & SLOWDOWN and any(x & b for x in bits)]


def summarize(state: str, samples: Sequence[Reading], drift_limit_pct: float = CLOCK_DRIFT_PCT) -> ClockSummary:
    busy = [r for r in samples if _awake(r)]
    readings = [r.sm_mhz for r in busy if r.sm_mhz is not None]
    if readings:  # a clock far below the rest with no slowdown reason is the GPU waking up, not a throttle
        floor = IDLE_CLOCK_FRACTION * statistics.median(readings)
        busy = [
            r for r in busy if r.sm_mhz is None or r.sm_mhz >= floor or (r.reasons is not None and r.reasons & SLOWDOWN)
        ]
    sm = [r.sm_mhz for r in busy if r.sm_mhz is not None]
    with_reasons = [r.reasons for r in samples if r.reasons is not None]
    pct = {
        name: 100.0 * sum(1 for bits in with_reasons if bits & bit) / len(with_reasons)
        for bit, name in REASONS.items()
        if with_reasons and any(bits & bit for bits in with_reasons)
    }
    median = statistics.median(sm) if sm else None
    drift = 100.0 * (max(sm) - min(sm)) / median if sm and median else None
    why = []
    if drift is not None and drift > drift_limit_pct:
        why.append(f"SM clock moved {drift:.1f}% ({min(sm)}-{max(sm)} MHz, limit {drift_limit_pct:g}%)")
    slow = _slowdowns(samples)
    if slow:
        why.append(f"{', '.join(slow)} active while measuring")
    return ClockSummary(
        state=state,
        samples=len(samples),
        idle_samples=len(samples) - len(busy),
        sm_min_mhz=min(sm) if sm else None,
        sm_max_mhz=max(sm) if sm else None,
        sm_median_mhz=median,
        drift_pct=drift,
        reasons_pct=pct,
        unstable=bool(why),
        why_unstable=why,
    )


class ClockWindow(TypedDict):
    """The SM clock while one stage was timed (timings.json ``clock`` / ``events_clock``)."""

    sm_mhz: float  # median of the busy samples (NVML's, or the GPU-side probe's)
    samples: int
    slowdown: list[str]  # reasons active in any sample of the window (NVML's)
    source: NotRequired[str]  # "probe": read on the GPU around each repetition; absent: NVML's samples
    range_mhz: NotRequired[list[float]]  # the probe's lowest and highest reading


def _busy_mhz(samples: Sequence[Reading]) -> list[int]:
    return [r.sm_mhz for r in samples if r.sm_mhz is not None and _awake(r)]


def start_mhz(samples: Sequence[Reading]) -> int | None:
    """The clock a measurement started at: the highest of its first three busy readings (a wake-up one outvoted)."""
    busy = _busy_mhz(samples)
    return max(busy[:3]) if busy else None


def window(samples: Sequence[Reading], start: float, end: float) -> ClockWindow | None:
    """The SM clock while one stage was timed (the busy samples taken between ``start`` and ``end``): their median
    and the slowdown reasons active in any of them; None when no busy sample fell in the window."""
    inside = [r for r in samples if r.t is not None and start <= r.t <= end]
    busy = _busy_mhz(inside)
    if not busy:
        return None
    return {"sm_mhz": statistics.median(busy), "samples": len(busy), "slowdown": _slowdowns(inside)}


def probed(mhz: Sequence[float | None] | None, nvml: ClockWindow | None) -> ClockWindow | None:
    """The clock of a stage timed with GPU-side probes: their median (NVML's slowdown reasons kept beside it), or
    NVML's window where no probe read a clock."""
    read = [m for m in mhz or [] if m is not None]
    if not read:
        return nvml
    return {
        "sm_mhz": round(statistics.median(read), 1),
        "samples": len(read),
        "slowdown": nvml["slowdown"] if nvml else [],
        "source": "probe",
        "range_mhz": [round(min(read), 1), round(max(read), 1)],
    }


def sagged(stage: str, clock: ClockWindow | None, start_mhz: float | None) -> str | None:
    """A note when the stage was timed at a median SM clock more than CLOCK_SAG_PCT below the clock the measurement
    started at: its figure is not a steady-clock figure."""
    if not clock or not start_mhz:
        return None
    mhz = float(clock["sm_mhz"])
    if mhz >= (1.0 - CLOCK_SAG_PCT / 100.0) * start_mhz:
        return None
    why = f" ({', '.join(clock['slowdown'])} active)" if clock.get("slowdown") else ""
    return (
        f"{stage} was timed at a median SM clock of {mhz:.0f} MHz, {100 * (1 - mhz / start_mhz):.0f}% below the "
        f"{start_mhz:.0f} MHz the measurement started at{why}: its duration is not a steady-clock figure (lock the "
        "clocks, or compare only runs at the same clock)"
    )
