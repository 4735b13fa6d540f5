"""report.json's kernels of each stage (``sections.kernels``, present where a mode measured them): every kernel with
its full name, each number tagged with where it came from (kbench.report.report_json's ``Value``)."""

from __future__ import annotations

from kbench.analysis.kernels import HostTime, StageKernel, StageKernels
from kbench.model import Model
from kbench.report.values import Value, _derived, _measured

PER_RUN = "{source}: its activity records, per run of the stage (median over the runs recorded)"


class KernelReport(Model):
    name: str  # whole, as the profiler named it
    short: str  # as report.md shows it
    launches: Value
    us: Value
    share_pct: Value
    grid: list[int] | None
    block: list[int] | None
    registers: int | None
    shared_bytes: int | None
    declared: bool | None  # among the plan's Stage.kernels (None: the plan declares none)
    op: str | None  # the PyTorch op that launched it ("Triton launch": no op, the driver API)
    source: str


class HostReport(Model):
    events_us: Value
    kernels_us: Value
    gap_us: Value
    gap_pct: Value
    api: dict[str, float]  # runtime/driver API call -> calls per run of the stage
    span_us: Value


class StageKernelsReport(Model):
    stage: str
    kernels: list[KernelReport]
    host: HostReport | None
    # where the kernels' sum falls outside the range of the stage's Duration: what each measured and why they differ
    # (kbench.report.kernel_times); None where they agree
    against_duration: str | None = None


def _kernel(k: StageKernel) -> KernelReport:
    by = PER_RUN.format(source=k.source)
    return KernelReport(
        name=k.name,
        short=k.short,
        launches=_measured(k.launches, "launches", by),
        us=_measured(k.us, "us", f"{by}, durations summed"),
        share_pct=_derived(k.share_pct, "%", "100 * us / the stage's kernels' us summed", us=k.us),
        grid=k.grid,
        block=k.block,
        registers=k.registers,
        shared_bytes=k.shared_bytes,
        declared=k.declared,
        op=k.op,
        source=k.source,
    )


def _host(h: HostTime) -> HostReport:
    return HostReport(
        events_us=_measured(h.events_us, "us", "CUDA events: the stage's median (timings.json samples_us)"),
        kernels_us=_measured(h.kernels_us, "us", "CUPTI: the stage's kernels summed, median (timings.json cupti_us)"),
        gap_us=_derived(
            h.gap_us, "us", "max(0, events_us - kernels_us)", events_us=h.events_us, kernels_us=h.kernels_us
        ),
        gap_pct=_derived(h.gap_pct, "%", "100 * gap_us / events_us", gap_us=h.gap_us, events_us=h.events_us),
        api=h.api,
        span_us=_measured(h.span_us, "us", "the census: the host's time in one run, under the profiler (median)"),
    )


def build(kernels: list[StageKernels], differ: dict[str, str]) -> list[StageKernelsReport]:
    """``differ``: the stages whose kernels and Duration disagree, with why (kbench.report.kernel_times.lines)."""
    return [
        StageKernelsReport(
            stage=sk.stage,
            kernels=[_kernel(k) for k in sk.kernels],
            host=_host(sk.host) if sk.host else None,
            against_duration=differ.get(sk.stage),
        )
        for sk in kernels
    ]
