"""The on-disk autotune cache: one JSON file per device, kernel, version, stage and parameters.

Entries are written atomically (temp file + rename). A corrupt entry (unreadable JSON, missing fields) or a
stale one (another tuning space, another Triton, or the version's source edited since it was tuned) is reported in
one log line and re-tuned, never a crash.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbench.errors import KernelError
from kbench.fsutil import read_nofollow, safe, write_json_atomic
from kbench.plan.base import Config

log = logging.getLogger(__name__)
SCHEMA = 1


@dataclass(frozen=True)
class TuneResult:
    best: Config
    history: list[dict[str, Any]]  # [{"config": {...}, "us": float}] in the order tried
    source: str  # "cache" | "tuned" | "fixed"
    path: Path | None


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


def read_entry(path: Path, space: Sequence[Config], toolchain: str, source: str = "") -> TuneResult | None:
    """The cached result, or None (with one log line) when the entry is absent, corrupt or stale."""
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
    if data.get("schema") != SCHEMA or data.get("space") != list(space) or data.get("toolchain") != toolchain:
        log.warning("autotune cache %s is stale (tuning space or toolchain changed); re-tuning", path)
        return None
    if data.get("source", "") != source:
        log.warning("autotune cache %s was tuned on other source of the version (edited since); re-tuning", path)
        return None
    # the plan's own config, not the file's: 128.0 or true equal 128 and 1 but are not what the space declares
    same = [c for c in space if c == best]
    if not same:
        log.warning("autotune cache %s names a config outside the tuning space; re-tuning", path)
        return None
    return TuneResult(best=dict(same[0]), history=history, source="cache", path=path)


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
    }
    write_json_atomic(path, payload)


class TuningFailed(KernelError):
    """No configuration of the tuning space ran."""


def tune(
    space: Sequence[Config],
    time_us: Callable[[Config], float | None],
    path: Path | None,
    toolchain: str,
    source: str = "",
) -> TuneResult:
    """Pick the fastest config of ``space`` (median microseconds from ``time_us``; None = the config failed to
    run), through the cache at ``path``; an entry counts only for the same ``source`` (the digest of the version's
    source, kbench.plan.sources; "" where it is not tracked)."""
    if len(space) == 1:
        return TuneResult(best=dict(space[0]), history=[], source="fixed", path=None)
    if path is not None and linked(path):
        path = None
    if path is not None and (cached := read_entry(path, space, toolchain, source)) is not None:
        return cached
    history: list[dict[str, Any]] = [{"config": dict(c), "us": time_us(c)} for c in space]
    ran = [h for h in history if h["us"] is not None]
    if not ran:
        raise TuningFailed(f"none of the {len(space)} tuning configurations ran")
    best = min(ran, key=lambda h: h["us"])["config"]
    if path is not None and linked(path):  # planted while it tuned (minutes, for a large space)
        path = None
    result = TuneResult(best=best, history=history, source="tuned", path=path)
    if path is not None:
        try:
            write_entry(path, result, space, toolchain, source)
        except OSError as e:
            log.warning("cannot write autotune cache %s (%s); continuing without caching", path, e.strerror or e)
    return result
