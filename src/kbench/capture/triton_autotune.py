"""A plan's kernels that tune themselves (``@triton.autotune``): kbench's timer as their benchmarker, and what they
chose, by how much, recorded beside kbench's own tuning.

Triton's Autotuner times each config of a new key on its first launch and keeps the lowest median. While kbench
prepares a stage on the GPU, every Autotuner the stage launches that uses Triton's default benchmarker (the plan
gave it no ``do_bench`` of its own) times its candidates with the stage timer instead (capture.timing.time_cuda:
the L2 flushed by reading, the GPU held before each start, TUNE_REPS repetitions, every sample kept), where
Triton's ``triton.testing.do_bench`` flushes by writing (the next kernel pays the write-back) and times the launch
overhead with the kernel. Triton still picks (one config after another, the lowest median, no incumbent): its pick
is recorded with its margin over the runner-up and whether the two are within noise (kbench.plan.autotune.beats),
so a pick that a rerun may contradict is said to be within noise.

Feature-detected, not version-checked: the benchmarker is replaced where the Autotuner keeps the one it was given
as ``_do_bench`` (None: Triton's default; 3.6 and 3.9 among them) and its ``do_bench`` can be shadowed on the
instance (a cached property); elsewhere the times it kept are recorded without a verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kbench.capture.timing import TUNE_REPS, time_cuda
from kbench.plan import autotune
from kbench.plan.base import Config

Timer = Callable[[Callable[[], object], int], list[float]]  # a callable and repetitions -> samples in microseconds
_ABSENT = object()


class Benchmarker:
    """Triton's benchmarker interface (``do_bench(fn, quantiles=...)``, milliseconds) over a kbench timer, keeping
    each call's samples by the identity of the list it returns (the list Triton keeps as that config's timing)."""

    def __init__(self, time: Timer, reps: int = TUNE_REPS) -> None:
        self.time, self.reps = time, reps
        self.samples: dict[int, list[float]] = {}
        self._kept: list[list[float]] = []  # the returned lists, alive so that their ids stay theirs

    def __call__(self, fn: Callable[[], object], quantiles: Sequence[float] | None = None, **_: Any) -> Any:
        import torch

        us = self.time(fn, self.reps)
        ms = torch.tensor(us, dtype=torch.float64) / 1000.0
        found = [float(ms.quantile(q)) for q in (quantiles or (0.5,))]
        self.samples[id(found)] = us
        self._kept.append(found)
        return found if quantiles else found[0]


def _stage_timer(fn: Callable[[], object], reps: int) -> list[float]:
    return time_cuda(fn, reps).us


def _config(cfg: Any) -> Config:
    """A triton.Config as kbench writes configs: its launch keywords (meta-parameters, warps, stages, ...)."""
    every = cfg.all_kwargs() if hasattr(cfg, "all_kwargs") else dict(getattr(cfg, "kwargs", {}))
    return {str(k): v for k, v in every.items() if v is not None}


def _name(tuner: Any) -> str:
    return str(getattr(getattr(tuner, "base_fn", None), "__name__", "") or type(tuner).__name__)


def _median_us(timing: Any) -> float | None:
    """A timing Triton kept, in microseconds (its first quantile, in ms); None where the config failed (inf)."""
    ms = timing[0] if isinstance(timing, list | tuple) and timing else timing
    return 1000.0 * float(ms) if isinstance(ms, int | float) and ms != float("inf") else None


def record(tuner: Any, key: Any, timings: dict[Any, Any], bench: Benchmarker | None, who: str) -> dict[str, Any]:
    """What ``tuner`` chose for ``key`` from ``timings`` (config -> what Triton kept; empty: it timed nothing):
    each config's time and the pick against the runner-up, judged where ``bench`` kept the samples (timed by
    kbench's timer), else the medians Triton kept, unjudged."""
    pick = tuner.cache[key]
    configs = [_config(c) for c in timings]
    out: dict[str, Any] = {"kernel": _name(tuner), "key": [str(k) for k in key], "timed_by": who}
    head = f"{_name(tuner)} (@triton.autotune, key {out['key']})"
    samples = [bench.samples.get(id(t)) if bench is not None else None for t in timings.values()]
    if pick in timings and any(samples):
        timed = [autotune.Timed.of(s) if s else None for s in samples]
        at = list(timings).index(pick)
        tried, decision = autotune.recorded(
            configs, timed, autotune.judged(timed, at, at), "", picked_by="Triton (the lowest median)"
        )
        return {**out, "tried": tried, "decision": decision, "line": f"{head}: {decision['line']}"}
    tried = [{"config": c, "us": _median_us(t)} for c, t in zip(configs, timings.values(), strict=True)]
    how = f"timed by {who} (no repetitions kept: not judged)" if timings else "without timing (one config left)"
    line = f"{head}: {autotune.named(_config(pick))} picked by Triton {how}"
    return {**out, "tried": tried, "decision": None, "line": line}


def earlier(tuner: Any) -> dict[str, Any] | None:
    """The pick of a tuner that tuned nothing now (Triton keeps its picks per key in memory, for the process)."""
    best = getattr(tuner, "best_config", None)
    if best is None or len(getattr(tuner, "configs", ())) < 2:
        return None
    line = (
        f"{_name(tuner)} (@triton.autotune): {autotune.named(_config(best))} chosen by Triton earlier in this process"
    )
    return {"kernel": _name(tuner), "timed_by": None, "chosen": _config(best), "line": line + " (not timed again)"}


@contextmanager
def watched(time: Timer = _stage_timer) -> Iterator[list[dict[str, Any]]]:
    """While the block runs, every Triton Autotuner launched benchmarks with ``time`` where it uses Triton's
    default benchmarker, and what each chose is recorded (``record``, or ``earlier``: once per tuner). Yields the
    records, filled as the block runs."""
    records: list[dict[str, Any]] = []
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # no Triton: nothing tunes itself
        yield records
        return
    original = Autotuner.run
    seen: set[int] = set()

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        ours = getattr(self, "_do_bench", _ABSENT) is None
        who = "kbench's stage timer" if ours else "the plan's own do_bench" if hasattr(self, "_do_bench") else "Triton"
        bench = Benchmarker(time) if ours else None
        had = vars(self).get("do_bench", _ABSENT)
        cache: dict[Any, Any] = self.cache if isinstance(getattr(self, "cache", None), dict) else {}
        before, timings = set(cache), getattr(self, "configs_timings", None)
        if bench is not None:
            try:
                self.do_bench = bench  # an instance attribute: it shadows Triton's cached property
            except AttributeError:  # a Triton whose do_bench is a plain property: its own benchmarker times
                bench, who = None, "Triton's own benchmarker (this Triton's cannot be replaced)"
        try:
            return original(self, *args, **kwargs)
        finally:
            if bench is not None:
                if had is _ABSENT:
                    vars(self).pop("do_bench", None)
                else:
                    self.do_bench = had
            new = [k for k in cache if k not in before]
            now = getattr(self, "configs_timings", None)
            fresh = dict(now) if isinstance(now, dict) and now is not timings else {}  # else: pruned to one config
            if bench is not None and fresh and not bench.samples:
                who = "Triton, read from its disk cache (cache_results)"
            records.extend(record(self, k, fresh, bench, who) for k in new)
            if not new and id(self) not in seen and (got := earlier(self)) is not None:
                records.append(got)
            seen.add(id(self))

    Autotuner.run = run
    try:
        yield records
    finally:
        Autotuner.run = original
