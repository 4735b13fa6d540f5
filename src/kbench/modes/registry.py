"""The one registry of profiling modes: name -> backend, imported on first use (backends pull in torch or
pandas). A new mode is one module beside this one and one line in ``BUILT_IN``."""

from __future__ import annotations

import importlib
from pathlib import Path

from kbench.errors import UsageError
from kbench.modes.base import CHOICES, FLAGS, MODE_OPTIONS, Backend, RunOptions

# name -> "module:attribute" of its backend, in the order --help lists them
BUILT_IN = {
    "annotation": "kbench.modes.counters:ANNOTATION",
    "event": "kbench.modes.event:EVENT",
    "ncu": "kbench.modes.counters:NCU",
    "nsys": "kbench.modes.nsys:NSYS",
    "proton": "kbench.modes.proton:PROTON",
    "intra": "kbench.modes.intra:INTRA",
}
_added: dict[str, Backend] = {}


def names() -> list[str]:
    return [*BUILT_IN, *(n for n in _added if n not in BUILT_IN)]


def register(backend: Backend) -> None:
    """Add a backend under its name (a built-in name is replaced until ``unregister``)."""
    _added[backend.name] = backend


def unregister(name: str) -> None:
    _added.pop(name, None)


def get(name: str) -> Backend:
    if name in _added:
        return _added[name]
    if name not in BUILT_IN:
        raise UsageError(f"unknown mode {name}; choose one of {', '.join(names())}")
    module, attr = BUILT_IN[name].split(":")
    backend: Backend = getattr(importlib.import_module(module), attr)
    return backend


def for_capture(path: Path, mode: str | None) -> Backend:
    """The backend that analyses a capture file: by its suffix, and ``mode`` where several read it."""
    backends = [get(n) for n in names()]
    readers = [b for b in backends if path.suffix in b.suffixes]
    if not readers:
        known = list(dict.fromkeys(b.describes for b in backends if b.suffixes))
        raise UsageError(f"{path}: kbench analyze reads {'; '.join(known)}")
    if mode is None:
        return readers[0]
    chosen = get(mode)
    if chosen not in readers:
        reads = f"reads {chosen.describes}" if chosen.suffixes else "reads no capture file"
        raise UsageError(
            f"--mode={mode} {reads}; a {path.suffix} capture is analysed as {' or '.join(b.name for b in readers)} mode"
        )
    return chosen


def check_options(backend: Backend, opts: RunOptions) -> None:
    """A mode option set for a mode that does not take it is a usage error, not silently ignored."""
    for name, default in MODE_OPTIONS.items():
        value = getattr(opts, name)
        if name in CHOICES and value not in CHOICES[name]:
            raise UsageError(f"{FLAGS[name]}={value}: choose {', '.join(CHOICES[name][:-1])} or {CHOICES[name][-1]}")
        if value != default and name not in backend.options:
            takers = [f"--prof_type={n}" for n in names() if name in get(n).options]
            raise UsageError(
                f"{FLAGS[name]} applies to {', '.join(takers) or 'no mode'} only, not --prof_type={backend.name}"
            )
