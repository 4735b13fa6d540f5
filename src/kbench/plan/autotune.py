"""The autotuner: which configuration of a stage's tuning space runs, and the on-disk cache of that choice (one JSON
file per device, kernel, version, stage and parameters).

Every candidate is timed as stages are (kbench.capture.timing: L2 flushed, many repetitions), interleaved in each
repetition so a clock drifting over the tuning meets all of them alike. The incumbent (the choice cached for earlier
source or toolchain, else the space's first configuration) stays unless another beats it beyond the noise (see
``beats``), so two tunings of the same source agree, or their record says the candidates are within noise.

Entries are written atomically (temp file + rename). A corrupt entry (unreadable JSON, missing fields) or a
stale one (another tuning space, another Triton, the version's source edited since it was tuned, another schema)
is reported in one log line and re-tuned, never a crash.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbench.errors import KernelError
from kbench.fsutil import read_nofollow, safe, write_json_atomic
from kbench.plan.base import Config

log = logging.getLogger(__name__)
SCHEMA = 2  # 2: candidates timed interleaved, the incumbent kept within noise, the decision recorded

# A candidate replaces the incumbent only when its median is at least this much lower (run-to-run differences of a
# stage's median on an unlocked clock reach this, and no repetition count within one run shows them) ...
BEYOND_PCT = 2.0
# ... and the two medians' distribution-free 95% intervals (order statistics) do not overlap.
Z95 = 1.96
RULE = (
    f"a candidate replaces the incumbent only when its median is at least {BEYOND_PCT:g}% lower and the two "
    "medians' 95% intervals do not overlap"
)

# where the incumbent came from
FIRST = "the first configuration of the tuning space"
CACHED = "the cached choice, tuned on other source or toolchain"
FIRST_RAN = "the first configuration that ran"  # the incumbent did not run
# Times every configuration given, interleaved: each one's samples in microseconds, None for one that failed to run.
Measure = Callable[[Sequence[Config]], Sequence[Sequence[float] | None]]


@dataclass(frozen=True)
class Timed:
    """One candidate's repetitions: the median, the interquartile spread and the median's 95% interval."""

    reps: int
    median_us: float
    spread_pct: float  # interquartile range over the median, in percent
    low_us: float  # the median's 95% interval, from the order statistics (no distribution assumed)
    high_us: float

    @classmethod
    def of(cls, samples_us: Sequence[float]) -> Timed:
        xs = sorted(float(x) for x in samples_us)
        n = len(xs)
        if not n:
            raise ValueError("no timing samples")
        med = statistics.median(xs)
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if n > 1 else (med, med, med)
        half = Z95 * math.sqrt(n) / 2  # the interval's ranks (1-based): about n/2 -+ z sqrt(n)/2, Binomial(n, 1/2)
        lo, hi = max(math.floor(n / 2 - half), 1), min(math.ceil(n / 2 + half) + 1, n)
        return cls(n, med, 100.0 * (q3 - q1) / med if med > 0 else 0.0, xs[lo - 1], xs[hi - 1])

    def record(self) -> dict[str, Any]:
        return {
            "us": self.median_us,
            "spread_pct": round(self.spread_pct, 3),
            "median_ci_us": [self.low_us, self.high_us],
            "reps": self.reps,
        }


def beats(fast: Timed, slow: Timed) -> bool:
    """Whether ``fast`` is faster than ``slow`` beyond the noise (RULE)."""
    gain = 100.0 * (slow.median_us - fast.median_us) / slow.median_us if slow.median_us > 0 else 0.0
    return gain >= BEYOND_PCT and fast.high_us < slow.low_us


@dataclass(frozen=True)
class Decision:
    """Which candidate was chosen (indices into the candidates), against the incumbent and the runner-up (the
    fastest other that ran, None when only one ran)."""

    chosen: int
    incumbent: int
    runner_up: int | None
    margin_pct: float | None  # the runner-up's median over the chosen one's, in percent (< 0: the chosen is slower)
    within_noise: bool  # the chosen one does not beat the runner-up beyond the noise


def _ran(timed: Sequence[Timed | None], i: int) -> Timed:
    t = timed[i]
    assert t is not None, f"candidate {i} did not run"
    return t


def judged(timed: Sequence[Timed | None], chosen: int, incumbent: int) -> Decision:
    """``chosen`` against the fastest other candidate that ran: the margin, and whether it is within noise."""
    others = [i for i, t in enumerate(timed) if t is not None and i != chosen]
    if not others:
        return Decision(chosen, incumbent, None, None, False)
    ch, ru = _ran(timed, chosen), _ran(timed, runner_up := min(others, key=lambda i: _ran(timed, i).median_us))
    margin = 100.0 * (ru.median_us - ch.median_us) / ch.median_us if ch.median_us > 0 else 0.0
    return Decision(chosen, incumbent, runner_up, margin, not beats(ch, ru))


def decide(timed: Sequence[Timed | None], incumbent: int) -> Decision:
    """The incumbent, unless candidates beat it beyond the noise: then the first (in the space's order) of those
    that the fastest of them does not beat, so challengers tied with each other resolve alike on every run."""
    ran = [i for i, t in enumerate(timed) if t is not None]
    if not ran:
        raise ValueError("no candidate ran")
    if timed[incumbent] is None:
        incumbent = ran[0]
    challengers = [i for i in ran if i != incumbent and beats(_ran(timed, i), _ran(timed, incumbent))]
    chosen = incumbent
    if challengers:
        fastest = _ran(timed, min(challengers, key=lambda i: _ran(timed, i).median_us))
        chosen = next(i for i in challengers if not beats(fastest, _ran(timed, i)))
    return judged(timed, chosen, incumbent)


def named(cfg: Config) -> str:
    """A config in words: ``BLOCK=128, num_warps=4``."""
    return ", ".join(f"{_plain(k)}={_plain(v)}" for k, v in cfg.items())


def _plain(x: object) -> str:
    """A number or a name as it is; anything else quoted, so that no line break of it reaches a report."""
    return str(x) if isinstance(x, int | float) or (isinstance(x, str) and x.isidentifier()) else repr(x)


def _differing(a: Config, b: Config) -> tuple[str, str]:
    """Two configs in words, each by the keys where they differ (all of them where none does)."""
    keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)] or list(a)
    return named({k: a[k] for k in keys if k in a}), named({k: b[k] for k in keys if k in b})


def words(d: Decision, configs: Sequence[Config], timed: Sequence[Timed | None], came: str, picked_by: str = "") -> str:
    """The decision in one line: what was chosen (kept as the incumbent that ``came`` from, chosen over it, or
    ``picked_by`` another tuner), against the runner-up, by how much, and whether that is within noise."""
    chosen = configs[d.chosen]
    if d.runner_up is None:
        return f"{named(chosen)}: the only configuration that ran"
    ch, ru = _ran(timed, d.chosen), _ran(timed, d.runner_up)
    assert d.margin_pct is not None
    mine, other = _differing(chosen, configs[d.runner_up])
    if picked_by:
        head = f"{mine} picked by {picked_by}"
    elif d.chosen == d.incumbent:
        head = f"{mine} kept, the incumbent ({came})"
    else:
        head = f"{mine} chosen over the incumbent {_differing(chosen, configs[d.incumbent])[1]}"
    faster = f"{d.margin_pct:.1f}% faster" if d.margin_pct >= 0 else f"{-d.margin_pct:.1f}% slower"
    versus = f"median {ch.median_us:.2f} us against {ru.median_us:.2f} us of the runner-up {other} ({faster})"
    if not d.within_noise:
        verdict = f"beyond the noise (at least {BEYOND_PCT:g}%, 95% intervals of the medians apart)"
    elif picked_by:
        verdict = "within noise (a rerun may pick the runner-up)"
    else:
        verdict = "within noise (a rerun may measure them the other way round; the incumbent stays)"
    return f"{head}: {versus}, {verdict}"


@dataclass(frozen=True)
class TuneResult:
    best: Config
    history: list[dict[str, Any]]  # [{"config": {...}, "us": median or None, "spread_pct", ...}] in space order
    source: str  # "cache" | "tuned" | "fixed"
    path: Path | None
    decision: dict[str, Any] | None = None  # the incumbent, the runner-up, the margin and whether within noise


def cache_root() -> Path:
    return Path(os.environ.get("KBENCH_CACHE_DIR", ".cache")) / "kernel-autotune"


def entry_path(root: Path, device: str, package: str, version: str, stage: str, params_slug: str) -> Path:
    return root / safe(device) / safe(package) / safe(version) / safe(stage) / f"{safe(params_slug)}.json"


DEPTH = 4  # the folders entry_path names below the cache root: device, package, version, stage


def linked(path: Path) -> bool:
    """Whether one of an entry's own folders is a symbolic link: kbench makes them as folders, so one was planted
    (the cache root may be shared, or come with a checked-out repo), and a write or a delete through it would land
    elsewhere. Said in one log line."""
    if found := next((p for p in list(path.parents)[:DEPTH] if p.is_symlink()), None):
        log.warning(
            "autotune cache %s: %s is a symbolic link, which kbench never makes; not used (remove it)", path, found
        )
    return found is not None


def _load(path: Path) -> dict[str, Any] | None:
    """The entry's fields, checked for shape; None (with one log line) when absent or corrupt."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = json.loads(read_nofollow(path))
        best, history = data["best"], data["history"]
        if not isinstance(best, dict) or not isinstance(history, list):
            raise ValueError("best/history have the wrong type")
        for h in history:
            us = h["us"]
            if not isinstance(h["config"], dict) or not (us is None or isinstance(us, int | float)):
                raise ValueError(f"history entry {h!r} is malformed")
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("autotune cache %s is corrupt (%s); re-tuning", path, e)
        return None
    assert isinstance(data, dict)
    return data


def _own(space: Sequence[Config], best: object) -> Config | None:
    """The plan's own config equal to ``best``: 128.0 or true equal 128 and 1 but are not what the space declares."""
    return next((dict(c) for c in space if c == best), None)


def _current(
    path: Path, data: dict[str, Any], space: Sequence[Config], toolchain: str, source: str
) -> TuneResult | None:
    """The loaded entry's result when it is current (same schema, space, toolchain and source, a config of the
    space); else None, said in one log line."""
    if data.get("schema") != SCHEMA or data.get("space") != list(space) or data.get("toolchain") != toolchain:
        log.warning("autotune cache %s is stale (tuning space, toolchain or schema changed); re-tuning", path)
        return None
    if data.get("source", "") != source:
        log.warning("autotune cache %s was tuned on other source of the version (edited since); re-tuning", path)
        return None
    best = _own(space, data["best"])
    if best is None:
        log.warning("autotune cache %s names a config outside the tuning space; re-tuning", path)
        return None
    try:
        history, decision = _remade(space, data["history"], data["decision"], space.index(best))
    except (ValueError, KeyError, TypeError) as e:
        log.warning("autotune cache %s is corrupt (%s); re-tuning", path, e)
        return None
    return TuneResult(best=best, history=history, source="cache", path=path, decision=decision)


def _timed(h: dict[str, Any]) -> Timed | None:
    """A candidate's Timed from its cached record (None: it did not run); ValueError where the numbers do not hold."""
    if h["us"] is None:
        return None
    low, high = h["median_ci_us"]
    t = Timed(int(h["reps"]), float(h["us"]), float(h["spread_pct"]), float(low), float(high))
    if not (
        all(map(math.isfinite, (t.median_us, t.spread_pct, t.low_us, t.high_us))) and t.median_us > 0 and t.reps > 0
    ):
        raise ValueError(f"history entry {h!r} holds no timing")
    return t


def _remade(
    space: Sequence[Config], history: list[dict[str, Any]], decision: dict[str, Any], chosen: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A cached entry's records made again from its numbers, so that every word the report shows of it is
    kbench's own (a cache folder may be shared or come with a repository: its text is not trusted)."""
    if [h["config"] for h in history] != list(space):
        raise ValueError("its history is not the tuning space's")
    timed = [_timed(h) for h in history]
    incumbent = _own(space, decision["incumbent"])
    came = decision["incumbent_from"]
    if incumbent is None or came not in (FIRST, CACHED, FIRST_RAN) or timed[chosen] is None:
        raise ValueError("its decision names no candidate of the space")
    return recorded(space, timed, judged(timed, chosen, space.index(incumbent)), came)


def forget(path: Path | None) -> bool:
    """Delete a cache entry (e.g. its config failed the correctness check); True when one was deleted."""
    if path is None or not path.exists() or linked(path):
        return False
    path.unlink()
    return True


def write_entry(path: Path, result: TuneResult, space: Sequence[Config], toolchain: str, source: str = "") -> None:
    payload = {
        "schema": SCHEMA,
        "toolchain": toolchain,
        "source": source,
        "space": list(space),
        "best": result.best,
        "history": result.history,
        "decision": result.decision,
    }
    write_json_atomic(path, payload)


class TuningFailed(KernelError):
    """No configuration of the tuning space ran."""


def recorded(
    configs: Sequence[Config], timed: Sequence[Timed | None], d: Decision, came: str, picked_by: str = ""
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each candidate's record (config, median, spread, the median's interval; ``us`` None: it did not run) and the
    decision's (the rule, incumbent and where it ``came`` from, chosen, runner-up, margin, within noise, a line)."""
    history = [{"config": dict(c), **(t.record() if t else {"us": None})} for c, t in zip(configs, timed, strict=True)]
    record: dict[str, Any] = {
        "rule": RULE,
        "incumbent": dict(configs[d.incumbent]),
        "incumbent_from": came,
        "chosen": dict(configs[d.chosen]),
        "runner_up": dict(configs[d.runner_up]) if d.runner_up is not None else None,
        "margin_pct": round(d.margin_pct, 3) if d.margin_pct is not None else None,
        "within_noise": d.within_noise,
        "line": words(d, configs, timed, came, picked_by),
    }
    if picked_by:
        record["picked_by"] = picked_by
    return history, record


def tune(
    space: Sequence[Config],
    measure: Measure,
    path: Path | None,
    toolchain: str,
    source: str = "",
) -> TuneResult:
    """The configuration of ``space`` to run, through the cache at ``path``: ``measure`` times every config
    interleaved (their samples; None = the config failed to run); an entry counts only for the same ``source``
    (the digest of the version's source, kbench.plan.sources; "" where it is not tracked)."""
    if len(space) == 1:
        return TuneResult(best=dict(space[0]), history=[], source="fixed", path=None)
    if path is not None and linked(path):
        path = None
    data = _load(path) if path is not None else None
    if path is not None and data is not None and (cached := _current(path, data, space, toolchain, source)):
        return cached
    # a stale entry's choice (earlier source or toolchain) is the incumbent: a re-tune keeps it within noise
    before = _own(space, data["best"]) if data is not None else None
    incumbent = next((i for i, c in enumerate(space) if c == before), 0)
    samples = list(measure(space))
    if len(samples) != len(space):
        raise ValueError(f"measure gave {len(samples)} timings for {len(space)} configurations")
    if not any(samples):
        raise TuningFailed(f"none of the {len(space)} tuning configurations ran")
    timed = [Timed.of(s) if s else None for s in samples]
    d = decide(timed, incumbent)
    came = (CACHED if before is not None else FIRST) if d.incumbent == incumbent else FIRST_RAN
    history, decision = recorded(space, timed, d, came)
    if path is not None and linked(path):  # planted while it tuned (minutes, for a large space)
        path = None
    result = TuneResult(best=dict(space[d.chosen]), history=history, source="tuned", path=path, decision=decision)
    if path is not None:
        try:
            write_entry(path, result, space, toolchain, source)
        except OSError as e:
            log.warning("cannot write autotune cache %s (%s); continuing without caching", path, e.strerror or e)
    return result
