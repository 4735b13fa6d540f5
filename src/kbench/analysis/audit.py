"""Cross-tool audits. Annotation and ncu modes: each stage's ncu duration (gpu__time_duration of its kernels,
summed) beside the CUDA-event median the same process measured outside ncu's ranges, their ratio, and, past
AUDIT_DIVERGENCE_PCT, the likely cause. Event mode: each stage's CUDA-event median beside its CUPTI one. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from kbench.analysis.bottleneck import AUDIT_DIVERGENCE_PCT, SHORT_STAGE_US
from kbench.analysis.counters import StageCounters
from kbench.model import Model


class AuditRow(Model):
    stage: str
    ncu_us: float
    events_us: float
    ratio: float  # ncu over events
    cause: str | None = None  # why they diverge, when they do

    def line(self) -> str:
        head = (
            f"{self.stage}: ncu {self.ncu_us:.2f} us, CUDA events {self.events_us:.2f} us in the same process "
            f"(ncu / events {self.ratio:.3f})"
        )
        return f"{head}: differs by more than {AUDIT_DIVERGENCE_PCT:g}%: {self.cause}" if self.cause else head


def cause(ncu_us: float, events_us: float) -> str | None:
    """The likely reason two timings of the same launches differ, or None within AUDIT_DIVERGENCE_PCT."""
    if abs(ncu_us / events_us - 1.0) * 100.0 <= AUDIT_DIVERGENCE_PCT:
        return None
    if events_us > ncu_us and events_us < SHORT_STAGE_US:
        return "on a short stage CUDA events add launch and event overhead (a few us) that ncu's kernel time has not"
    if events_us > ncu_us:
        return (
            "the events ran slower: a lower SM clock while they were taken (power or heat: unlocked clocks), or the "
            "gaps between the stage's kernels, which ncu does not count"
        )
    return (
        "ncu's replay ran slower: it starts each kernel with flushed caches (--cache-control all) and, with "
        "--clock-control base, at the base clock; the events' kernels may have found data in L2"
    )


def audit(counters: Sequence[StageCounters], events: dict[str, list[float]]) -> list[AuditRow]:
    """One row per stage that both tools timed."""
    rows = []
    for c in counters:
        samples = events.get(c.stage)
        if not samples or not c.duration_us:
            continue
        ev = statistics.median(samples)
        rows.append(AuditRow(stage=c.stage, ncu_us=c.duration_us, events_us=ev, ratio=c.duration_us / ev,
                             cause=cause(c.duration_us, ev)))  # fmt: skip
    return rows


def cross_check(stages: dict[str, Any]) -> list[str]:
    """Event mode's audit: per stage, CUDA events against CUPTI (medians) with each phase's clock, or why CUPTI gave
    no figure."""
    out = []
    for name, s in stages.items():
        if s.get("cupti_us"):
            ev, cu = statistics.median(s["samples_us"]), statistics.median(s["cupti_us"])
            clocks = ""
            if (e := s.get("events_clock")) and (c := s.get("clock")):
                by = " (read on the GPU around each repetition)" if c.get("source") == "probe" else ""
                clocks = (
                    f"; median SM clock {e['sm_mhz']:.0f} MHz while timed by events, {c['sm_mhz']:.0f} by CUPTI{by}"
                )
            out.append(
                f"{name}: CUDA events {ev:.2f} us, CUPTI {cu:.2f} us ({ev - cu:+.2f} us, {100 * (ev / cu - 1):+.1f}%: "
                "launch and event overhead, the gaps between a stage's kernels (CUPTI does not count them), and any "
                f"clock difference between the two measurements{clocks})"
            )
        elif s.get("cupti_note"):
            out.append(f"{name}: no CUPTI figure ({s['cupti_note']}); its duration is the CUDA-event median")
    return out
