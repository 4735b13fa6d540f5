"""The distance waterfall: a stage's time from its practical roof up to what it measured, each step a measured cause
in microseconds and points (shares of the plan's time, as Top 3's gains), what no step explains left as its own bar.
Pure.

The steps come in a fixed order, each taking at most what the steps before it leave of the distance (the causes
overlap: a stall and the mechanism behind it are one cost, counted once):
1. the mechanisms the catalogue named (idle SMs, launches, work beyond the model, latency not hidden, issue-bound,
   tensor feed, precision, spills, ...), largest first, so that each keeps the gain its own model gives unless a
   larger one already holds that time; among them, where no entry names it, the work beyond the model: tensor FLOPs
   counted (ncu) and DRAM bytes counted or sampled (PM sampling's DRAM % of the datasheet bandwidth x the time),
   priced on the practical roof (the roof's time of the work done, less the
   roof's time of the work the plan needs);
   and, where no entry named idle SMs, the measured idle share (``sm_busy_pct``: the average SM's active cycles over
   the busiest's) of the kernel's time;
2. the stall items and the hottest line; then, where ncu counted warp stalls, every other stall reason's share of
   what is left (the warp states the cycles went to);
3. what is left: unexplained.

Each item of Top 3 is then held to its step: no item promises more than the waterfall gives its mechanism
(``held``). Host time lies outside the kernels' Duration and outside the waterfall.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import Field

from kbench.analysis import roofline as rl
from kbench.analysis.catalogue.evidence import GAIN, Evidence, Opportunity, finding, roof_words
from kbench.analysis.catalogue.lines import XU_BUSY_PCT
from kbench.analysis.catalogue.programs import EVEN_CHANGE
from kbench.analysis.catalogue.stalls import STALLS, idle_share
from kbench.analysis.sampling import moved_bytes
from kbench.model import Model

# item metrics (after the stage's name) by the step family they account for
IDLE = (
    "grid_ctas", "waves", "tail_idle_pct", "sm_busy_pct", "program_work_max_over_mean", "launches",
    "undeclared_kernel_pct",
)  # fmt: skip
WORK = (
    "flops_over_model", "repeated_tensor_work", "dram_bytes_over_model", "distinct_bytes_over_model_predicted",
    "exchanged_bytes_pct",
)  # fmt: skip
LAST = ("stall_", "line_", "mbarrier_wait_share")  # what the warps did: after every mechanism
SMALL_STALL = 0.05  # stall reasons under this share of the stalls are one bar ("other stalls")
SHOWN = 6  # steps a stage's row shows in report.md (the others as one)
MEASURED_WORK = 1.05  # counted work this much over the model is a step (below: counting and sampling noise)


class Step(Model):
    """One bar of the waterfall."""

    name: str  # the cause, in words
    us: float  # the stage's time it accounts for (after the steps before it)
    points: float  # that time as a share of the plan's time, %
    by: str  # what measured it: a catalogue item's trigger, or the counter the step reads
    kernel: str | None = None
    item: str | None = None  # the Top-3 candidate it is (its name), where it is one

    @property
    def short(self) -> str:
        """The cause without its figures (an item's name up to its colon or its first aside, a kernel's kept), as
        the Distance table shows it."""
        return re.split(r" \((?!kernel )", self.name.split(": ", 1)[0], maxsplit=1)[0]


class KernelPart(Model):
    """One kernel of a stage of several: its time and share, and the DRAM bytes it moved with their time on the
    practical bandwidth where they were measured (ncu, or PM sampling)."""

    name: str
    us: float
    share_pct: float | None
    dram_bytes: float | None = None
    dram_roof_us: float | None = None  # those bytes at the practical DRAM bandwidth
    by: str | None = None  # what measured the bytes


class Waterfall(Model):
    """A stage's distance to its practical roof, step by step."""

    stage: str
    kernel: str | None  # the kernel its facts describe (the stage's main kernel)
    measured_us: float
    roof_us: float
    roof: str  # the practical roof that limits it, in words
    total_us: float  # the plan's time: points are shares of it
    steps: list[Step]
    unexplained_us: float
    counted: bool  # counters (ncu or PM sampling) measured the stage: unexplained is never an item's lead there
    not_measured: list[str]  # what this run did not measure that steps read (annotation and ncu modes count all)
    considered: list[str] = Field(default_factory=list, exclude=True)  # the items laid out (``held`` holds them)
    kernels: list[KernelPart] = Field(default_factory=list)  # a stage of several kernels: where its time went

    @property
    def gap_us(self) -> float:
        return max(0.0, self.measured_us - self.roof_us)

    @property
    def gap_points(self) -> float:
        return 100.0 * self.gap_us / self.total_us if self.total_us else 0.0

    @property
    def unexplained_points(self) -> float:
        return 100.0 * self.unexplained_us / self.total_us if self.total_us else 0.0

    def shown(self, most: int = SHOWN) -> tuple[list[Step], float]:
        """The ``most`` largest steps in their order, and the time of the others together."""
        keep = sorted(self.steps, key=lambda s: -s.us)[:most]
        return [s for s in self.steps if s in keep], sum(s.us for s in self.steps if s not in keep)


def _suffix(o: Opportunity) -> str:
    return o.metric.split(".", 1)[-1]


IDLE_FAMILY, WORK_FAMILY, OTHER_FAMILY, LAST_FAMILY = range(4)


def _family(o: Opportunity) -> int:
    s = _suffix(o)
    if s in IDLE:
        return IDLE_FAMILY
    if s in WORK:
        return WORK_FAMILY
    if s.startswith(LAST):
        return LAST_FAMILY
    return OTHER_FAMILY


def counted(e: Evidence) -> bool:
    """Whether counters measured the stage: ncu's (stalls, DRAM bytes, tensor FLOPs) or PM sampling's."""
    s = e.stage
    return bool(e.stalls) or e.moved_bytes is not None or s.tc_pct is not None or s.dram_pct is not None


def _tensor_ratio(e: Evidence) -> tuple[float, str] | None:
    """Tensor FLOPs done over those the plan's model needs, as ncu counted them. PM sampling's tensor pipe % is not
    read as FLOPs: it counts the pipe's active cycles, 1.15-1.26x the cycles the counted FLOPs need on healthy
    GEMMs and attention kernels of the H100 (issue 51's scores, epilogue and splitk_gemm after, whose ncu counts equal
    the model)."""
    s = e.stage
    if not s.flops or not e.tensor_paths:
        return None
    return sum(e.tensor_paths.values()) / s.flops, "ncu's tensor FLOPs (sm__ops_path_tensor_*)"


def _bytes_ratio(e: Evidence) -> tuple[float, str] | None:
    """DRAM bytes moved over the plan's compulsory bytes: ncu's count, else sampled DRAM % x peak x duration."""
    s = e.stage
    if not s.dram_bytes:
        return None
    if e.moved_bytes:
        return e.moved_bytes / s.dram_bytes, "ncu's DRAM bytes (dram__bytes)"
    if s.dram_pct is None or not e.dram_peak_gbps:
        return None
    moved = moved_bytes(s.dram_pct, e.dram_peak_gbps, e.us)
    return moved / s.dram_bytes, f"PM sampling's DRAM {s.dram_pct:.1f}% of {e.dram_peak_gbps:g} GB/s"


BYTES_CHANGE = (
    "move only the compulsory bytes: keep what one kernel hands the next on chip (fuse them), read each input once "
    "(larger tiles, a GROUP_M-style swizzle so neighbouring CTAs share tiles in L2), no scratch round trips or padding"
)
WORK_CHANGE = (
    "compute only what the result keeps: skip masked-out tiles (bound the loop per CTA), no product computed twice "
    "(the TTGIR's layouts say whether warpgroups repeat one), tiles that divide the problem"
)


def _work_items(e: Evidence) -> list[Opportunity]:
    """Work beyond the model as items, priced on the practical roof: the roof's time of the FLOPs done (bytes as
    modelled) less the roof's time, then that of the bytes moved as well."""
    s, c = e.stage, e.practical
    if c is None or s.flops is None or s.dram_bytes is None:
        return []
    flops, out = s.flops, []
    base = rl.bound_us(c, flops, s.dram_bytes)
    tensor = _tensor_ratio(e)
    if tensor is not None and tensor[0] >= MEASURED_WORK and not e.memory_limited_doing(tensor[0]):
        flops = s.flops * tensor[0]
        more = rl.bound_us(c, flops, s.dram_bytes) - base
        out.append(_priced(e, f"Tensor work beyond the model in {e.where}: {tensor[0]:.2f}x the plan's FLOPs "
                       f"({tensor[1]}) cost {more:.1f} us on the practical roof", more, "flops_over_model",
                       f"{tensor[0]:.2f}x", WORK_CHANGE))  # fmt: skip
        base += more
    moved = _bytes_ratio(e)
    if moved is not None and moved[0] >= MEASURED_WORK:
        more = rl.bound_us(c, flops, s.dram_bytes * moved[0]) - base
        out.append(_priced(e, f"DRAM bytes beyond the model in {e.where}: {moved[0]:.2f}x the compulsory bytes "
                       f"({moved[1]}) cost {more:.1f} us on the practical roof", more, "dram_bytes_over_model",
                       f"{moved[0]:.2f}x", BYTES_CHANGE))  # fmt: skip
    return [o for o in out if o.gain_pct > 0]


def _priced(e: Evidence, name: str, us: float, metric: str, value: str, change: str) -> Opportunity:
    return Opportunity(
        name=name,
        gain_pct=e.gain(us),
        metric=f"{e.name}.{metric}",
        value=value,
        change=change,
        named=True,
        stage=e.name,
        kernel=e.kernel_name,
        formula=GAIN.format(saved="roof_us_of_the_extra_work"),
        inputs=e.gain_inputs(roof_us_of_the_extra_work=us),
    )


def _idle_item(e: Evidence) -> Opportunity | None:
    """The SMs' measured idle time (the average SM's active cycles over the busiest's, ncu or PM sampling) where no
    entry of the catalogue named it: the kernel's time x (1 - busy)."""
    busy = e.sm_busy_pct
    if busy is None or busy >= 100.0:
        return None
    return finding(
        e,
        f"SMs idle in {e.where}: the average SM was busy {busy:.1f}% of the busiest SM's cycles (partial waves, "
        "uneven programs, the launch's ramp)",
        e.us * (1.0 - busy / 100.0),
        (f"{e.name}.sm_busy_pct", f"{busy:.1f}%"),
        EVEN_CHANGE.format(name=e.name),
    )


def _stall_steps(e: Evidence, named: set[str]) -> list[tuple[str, float]]:
    """Every stall reason no item names, with its share of those reasons' stalls (small ones together); the stalls
    of a warp-specialized kernel's warps in no partition left out (they wait at a barrier for the whole run: padding
    to whole warpgroups, no time of the stage's), as the stall items leave them out."""
    left = {r: w for r, v in e.stalls.items() if r not in named and (w := v * (1.0 - idle_share(e, r))) > 0}
    total = sum(left.values())
    if total <= 0:
        return []
    out: list[tuple[str, float]] = []
    other = 0.0
    for reason, per in sorted(left.items(), key=lambda kv: kv[1], reverse=True):
        share = per / total
        if share < SMALL_STALL:
            other += share
            continue
        what = STALLS[reason].mechanism if reason in STALLS else f"warps stall on {reason}"
        out.append((f"stall on {reason}: {what} ({100 * share:.0f}% of the stalls no item names)", share))
    if other:
        out.append((f"other stall reasons, each under {100 * SMALL_STALL:.0f}% ({100 * other:.0f}% together)", other))
    return out


def _issuing_us(e: Evidence) -> float | None:
    """The kernel's time its schedulers spent issuing (warp instructions issued over what they could issue): stall
    reasons explain only the rest. None where the issue count or the SM cycles were not measured."""
    per_clock = e.limits.issue_per_clock if e.limits else None
    if not e.issued or not e.sm_cycles or not per_clock:
        return None
    return e.kernel_us * min(1.0, e.issued / (e.sm_cycles * per_clock))


def build(e: Evidence, items: Sequence[Opportunity]) -> tuple[Waterfall | None, list[Opportunity]]:
    """The stage's waterfall from its evidence and the catalogue's items for it (``items``: diagnose's, the
    unexplained rest and the items outside the stage's Duration left out), and the items the waterfall itself adds
    (work beyond the model no catalogue item names); (None, []) without a practical roof."""
    bound = e.bound_us
    if bound is None or e.total_us <= 0:
        return None, []
    gap = max(0.0, e.us - bound)
    left = gap
    steps: list[Step] = []

    def take(name: str, us: float, by: str, item: str | None = None, kernel: str | None = None) -> None:
        nonlocal left
        got = max(0.0, min(us, left))
        if got <= 0:
            return
        left -= got
        steps.append(
            Step(
                name=name,
                us=got,
                points=100.0 * got / e.total_us,
                by=by,
                kernel=kernel or e.kernel_name,
                item=item,
            )
        )

    def taken(o: Opportunity) -> None:
        take(o.name, o.gain_pct * e.total_us / 100.0, f"{o.metric}={o.value}", o.name, o.kernel)

    own = [o for o in items if not o.rest and not o.stop]
    suffix = {o.name: _suffix(o) for o in own}  # a step's item by its name
    mechanisms = [o for o in own if _family(o) != LAST_FAMILY]
    added = [] if any(_family(o) == WORK_FAMILY for o in own) else _work_items(e)
    if not any(_family(o) == IDLE_FAMILY for o in own) and (idle := _idle_item(e)) is not None:
        added.append(idle)
    # the mechanisms, largest first: each keeps the estimate its own model gives unless those before it took the time
    for o in sorted([*mechanisms, *added], key=lambda o: -o.gain_pct):
        taken(o)
    if (xu := e.pipes.get("xu")) is not None and xu >= XU_BUSY_PCT:
        # the special functions are no FLOPs of the model: the pipe's busy time beyond its item is a cause of its own
        held_us = sum(st.us for st in steps if suffix.get(st.item or "") == "xu_pipe_pct")
        take(f"special-function pipe (XU) busy {xu:.0f}% of the time: work the plan's FLOPs do not count",
             e.kernel_us * xu / 100.0 - held_us, f"{e.name}.xu_pipe_pct={xu:.1f}%")  # fmt: skip
    for o in sorted((o for o in own if _family(o) == LAST_FAMILY), key=lambda o: -o.gain_pct):
        taken(o)
    # the reasons the stall items hold (one item may carry two: its inputs name both)
    stall_items = [o for o in own if suffix[o.name].startswith("stall_")]
    named = {r for o in stall_items for r in (suffix[o.name].removeprefix("stall_"), *o.inputs) if r in e.stalls}
    if left > 0 and e.stalls:
        # the stalls share what is left, at most the time no instruction issued (the stall items above included)
        issuing = _issuing_us(e)
        stalled = sum(st.us for st in steps if suffix.get(st.item or "", "").startswith("stall_"))
        pool = left if issuing is None else max(0.0, min(left, e.kernel_us - issuing - stalled))
        for name, share in _stall_steps(e, named):
            take(name, pool * share, "ncu warp stalls")
    fall = Waterfall(
        stage=e.name,
        kernel=e.kernel_name,
        measured_us=e.us,
        roof_us=bound,
        roof=roof_words(e),
        total_us=e.total_us,
        steps=steps,
        unexplained_us=left,
        counted=counted(e),
        not_measured=_not_measured(e),
        considered=[o.name for o in own + added],
        kernels=_kernel_parts(e),
    )
    return fall, added


def _kernel_parts(e: Evidence) -> list[KernelPart]:
    """Each kernel of a stage of several, with its time (CUPTI, nsys or ncu) and the DRAM bytes it moved."""
    ks = [k for k in (e.kernels.kernels if e.kernels else []) if k.us is not None]
    if len(ks) < 2:
        return []
    gbps = e.practical.gbps if e.practical else None
    out = []
    for k in ks:
        roof = k.dram_bytes / (gbps * 1e3) if k.dram_bytes is not None and gbps else None  # ncu: reads + writes
        out.append(KernelPart(name=k.short, us=k.us or 0.0, share_pct=k.share_pct, dram_bytes=k.dram_bytes,
                              dram_roof_us=roof, by=k.bytes_by))  # fmt: skip
    return out


def _not_measured(e: Evidence) -> list[str]:
    """The steps this stage's data cannot give, in words."""
    out = []
    if not e.stalls:
        out.append("warp stalls")
    if e.sm_busy_pct is None and e.tail_idle_pct is None:
        out.append("idle SMs")
    if e.moved_bytes is None and e.stage.dram_pct is None:
        out.append("DRAM bytes")
    if not e.tensor_paths and not e.memory_limited:
        out.append("tensor FLOPs")
    return out


def held(items: Sequence[Opportunity], fall: Waterfall) -> list[Opportunity]:
    """Each item the waterfall laid out held to its step: no gain beyond what the waterfall gives its mechanism."""
    steps = {s.item: s for s in fall.steps if s.item}
    out = []
    for o in items:
        if o.name not in fall.considered:
            out.append(o)
            continue
        step = steps.get(o.name)
        points = step.points if step is not None else 0.0  # no time left for it once the steps before took theirs
        if points < o.gain_pct - 1e-9:
            o = o.capped(points, "waterfall_step_pct", waterfall_step_pct=points)
        out.append(o)
    return out
