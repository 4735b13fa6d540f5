"""The kernels of each stage: what the GPU really ran inside a stage's range, whatever mode saw it (CUPTI's activity
records in event mode, the timeline in nsys mode, the profiled kernels in the counter modes). Pure.

A stage's plan declares the kernels it expects (``Stage.kernels``); what runs may differ: a framework operation
(a dtype conversion, a copy, a memset) adds kernels, a launch runs a grid other than the one the plan declared. Every
fact about "the stage's kernel" belongs to one of these kernels, and an item about a kernel is weighed by its share
of the stage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from kbench.model import Model

if TYPE_CHECKING:
    from kbench.plan.base import Stage

# runtime/driver API calls that allocate or free memory (a cudaMallocAsync is stream-ordered: the host does not wait)
ALLOCATES = ("cudaMalloc", "cudaFree", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost", "cuMemAlloc", "cuMemFree")


class StageKernel(Model):
    """One kernel (by name) the GPU ran inside a stage, per run of the stage."""

    name: str
    launches: float  # launches per run of the stage (a median over the runs seen)
    us: float | None = None  # GPU time per run of the stage, all its launches summed
    share_pct: float | None = None  # of the stage's summed kernel time
    grid: list[int] | None = None  # the grid the GPU ran (x, y, z), not the one the plan declared
    block: list[int] | None = None  # threads per CTA (x, y, z)
    registers: int | None = None  # per thread
    shared_bytes: int | None = None  # per CTA, static + dynamic
    declared: bool | None = None  # among the plan's Stage.kernels; None: the plan declares none
    op: str | None = None  # the framework operation that launched it (the PyTorch op), where the profiler tells
    source: str = ""  # what saw it: "CUPTI", "nsys", "ncu"
    # DRAM bytes it moved per run of the stage, measured: read and written (ncu), or only their sum (PM sampling)
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    dram_bytes: float | None = None
    bytes_by: str | None = None  # what measured them

    @property
    def short(self) -> str:
        """Its name as a table shows it (kbench.analysis.kernels.short_name)."""
        return short_name(self.name)

    @property
    def ctas(self) -> int | None:
        return math.prod(int(g) for g in self.grid) if self.grid else None

    @property
    def threads(self) -> int | None:
        return math.prod(int(b) for b in self.block) if self.block else None


class HostTime(Model):
    """Host time inside a stage (event mode): its CUDA-event time against the kernels' GPU time, and the runtime and
    driver API calls one run of the stage makes (CUPTI's API records)."""

    events_us: float  # the stage's CUDA-event median
    kernels_us: float  # the kernels' GPU time per run (CUPTI, summed)
    api: dict[str, float] = Field(default_factory=dict)  # API call name -> calls per run of the stage
    span_us: float | None = None  # the host's time in one run of the stage (the census's, under the profiler)

    @property
    def gap_us(self) -> float:
        return max(0.0, self.events_us - self.kernels_us)

    @property
    def gap_pct(self) -> float:
        return 100.0 * self.gap_us / self.events_us if self.events_us > 0 else 0.0


class StageKernels(Model):
    """The kernels of one stage, largest first, and (event mode) its host time."""

    stage: str
    kernels: list[StageKernel]
    host: HostTime | None = None

    @property
    def main(self) -> StageKernel | None:
        """The kernel holding the most GPU time (the first listed where no time was measured)."""
        timed = [k for k in self.kernels if k.us is not None]
        if timed:
            return max(timed, key=lambda k: k.us or 0.0)
        return self.kernels[0] if self.kernels else None

    def host_work(self) -> dict[str, float]:
        """What one run does that makes the host (and so the GPU) wait, from its API calls and copies:
        synchronizations, copies between host and device, allocations; and its launches (API calls)."""
        calls = self.host.api.items() if self.host else []
        return {
            "synchronizations": sum(n for name, n in calls if "Synchronize" in name),
            "host-device copies": sum(k.launches for k in self.kernels if "DtoH" in k.name or "HtoD" in k.name),
            "allocations": sum(n for name, n in calls if name in ALLOCATES),
            "launches": sum(n for name, n in calls if "Launch" in name),
        }

    def host_line(self) -> str | None:
        """The host time a report shows for this stage (None: not measured)."""
        h = self.host
        if h is None:
            return None
        did = counted(self.host_work()) or "no API call recorded"
        return (
            f"{self.stage}: {h.events_us:.2f} us by CUDA events against {h.kernels_us:.2f} us of kernels (CUPTI, "
            f"the Duration above), {h.gap_pct:.1f}% outside them; per run: {did}"
        )

    def describes(self, kernel: str | None) -> str | None:
        """Which kernel a stage's launch record (Tiling) describes, against what the GPU ran (None: nothing to say)."""
        if not kernel or not self.kernels:
            return None
        k = next((k for k in self.kernels if k.name == kernel), None)
        if k is None:
            return f"{self.stage}: {kernel} was not among the kernels {self.kernels[0].source} saw in the stage"
        if len(self.kernels) == 1:
            return None  # the stage's only kernel: the Kernels table already says it all
        share = f", {k.share_pct:.1f}% of the stage's kernel time" if k.share_pct is not None else ""
        grid = f", launched with grid {'x'.join(map(str, k.grid))}" if k.grid else ""
        return f"{self.stage}: the facts above describe {k.short}{share}{grid} ({len(self.kernels)} kernel(s) ran)"

    def share(self, name: str) -> float | None:
        """A kernel's share of the stage's kernel time, 0..1 (None: not timed)."""
        k = next((k for k in self.kernels if k.name == name), None)
        return None if k is None or k.share_pct is None else k.share_pct / 100.0


SHORT = 60  # characters of a kernel's name a table shows (report.json keeps it whole)
# template arguments that say nothing about what a library kernel does: types, and the wrappers around the functor
GENERIC = frozenset(
    (
        *("float", "double", "int", "unsigned", "char", "bool", "long", "short", "half", "void", "const", "signed"),
        *("true", "false", "std", "array", "c10", "BFloat16", "Half", "operator", "lambda"),
        *("ReduceOp", "func_wrapper_t", "BinaryFunctor", "OffsetCalculator", "TrivialOffsetCalculator"),
    )
)


def short_name(name: str) -> str:
    """A mangled C++ kernel name cut to what tells it apart: its function's name without namespaces, return type or
    parameters, and its first template argument that names what it does (the functor):
    "reduce_kernel<NormTwoOps>", "unrolled_elementwise_kernel<direct_copy_kernel_cuda>". Other names stay whole."""
    if "::" not in name and len(name) <= SHORT:
        return name
    base = name.removeprefix("void ").replace("(anonymous namespace)::", "").strip()
    head = re.split(r"[<(]", base, maxsplit=1)[0]
    short = head.rsplit("::", 1)[-1] or head
    if base[len(head) : len(head) + 1] == "<":
        words = (w.rsplit("::", 1)[-1] for w in re.findall(r"\b[A-Za-z_][\w:]*", base[len(head) + 1 :]))
        functor = next((w for w in words if w and w not in GENERIC), None)
        short = f"{short}<{functor}>" if functor else short
    return short if len(short) <= SHORT else short[: SHORT - 1] + "…"


def counted(work: dict[str, float]) -> str:
    """``StageKernels.host_work``'s counts in words: "1 synchronization, 2 launches"."""
    one = {
        "synchronizations": "synchronization",
        "host-device copies": "host-device copy",
        "allocations": "allocation",
        "launches": "launch",
    }
    return ", ".join(f"{n:g} {one.get(what, what) if n == 1 else what}" for what, n in work.items() if n)


def declared_kernels(stages: Iterable[Stage]) -> dict[str, list[str]]:
    """The kernels each stage of a plan declares, by stage name."""
    return {s.name: list(s.kernels) for s in stages}


def is_declared(name: str, declared: Sequence[str]) -> bool | None:
    """Whether a kernel the GPU ran is one the plan declared (a declared name is the kernel's name, or a part of a
    library kernel's mangled name); None when the plan declares none."""
    wanted = [d for d in declared if d]
    if not wanted:
        return None
    return any(d in name for d in wanted)


def shares(kernels: list[StageKernel]) -> list[StageKernel]:
    """The kernels with their share of the summed time filled in, largest first."""
    total = sum(k.us for k in kernels if k.us is not None)
    out = [
        k.model_copy(update={"share_pct": 100.0 * k.us / total if k.us is not None and total > 0 else None})
        for k in kernels
    ]
    return sorted(out, key=lambda k: -(k.us or 0.0))
