"""The one registry of profiling modes: name -> backend, imported on first use (backends pull in torch or
pandas). A new mode is one module beside this one and one line in ``BUILT_IN``."""

from __future__ import annotations

import importlib
from pathlib import Path

from kbench.errors import UsageError
from kbench.modes.base import CHOICES, FLAGS, MODE_OPTIONS, Backend, RunOptions
from kbench.report import folder

# name -> "module:attribute" of its backend, in the order --help lists them
BUILT_IN = {
    "annotation": "kbench.modes.counters:ANNOTATION",
    "event": "kbench.modes.event:EVENT",
    "ncu": "kbench.modes.counters:NCU",
    "nsys": "kbench.modes.nsys:NSYS",
    "proton": "kbench.modes.proton:PROTON",
    "intra": "kbench.modes.intra:INTRA",
    "access": "kbench.modes.access:ACCESS",
}
# name -> the capture files `kbench analyze` hands its backend, and those files in words: the backend's own
# ``suffixes`` and ``describes`` (a test keeps them equal), here so that choosing the reader of a capture imports
# that backend alone
READS: dict[str, tuple[tuple[str, ...], str]] = {
    "annotation": ((".ncu-rep",), "Nsight Compute reports (.ncu-rep)"),
    "event": ((), ""),
    "ncu": ((".ncu-rep",), "Nsight Compute reports (.ncu-rep)"),
    "nsys": ((".sqlite", ".json"), "nsys SQLite exports (.sqlite) and PyTorch-profiler traces (.json)"),
    "proton": ((".hatchet",), "Proton profiles (.hatchet)"),
    "intra": ((), ""),
    "access": ((), ""),
}
# the files kbench writes about a run: given to analyze, they are refused as no capture
RECORDS = frozenset({folder.REPORT_JSON, folder.RESULT, folder.PARAMS})
# name -> what the mode measures, in a phrase: `python -m kbench.kernel --help`, the MCP profile tool and the API's
# functions say it from here (a test keeps every mode named there)
SUMMARY = {
    "annotation": "Nsight Compute with a short metric list per stage: counters, roofline, bottleneck, Top 3",
    "event": "CUPTI's kernel times of each stage and of the whole plan (no counters; the quickest mode)",
    "ncu": "the full Nsight Compute set per stage: rules, annotated source and SASS",
    "nsys": "the plan's timeline over its iterations (Nsight Systems, else the PyTorch profiler): overlap, gaps",
    "proton": "Triton's profiler (Proton) around each stage's repetitions, and its overhead",
    "intra": "inside the kernel: a task timeline per CTA and SM from a kernel that records its tasks",
    "access": "no GPU: each load/store line traced under Triton's CPU interpreter (bytes, masked lanes, coalescing, "
    "reuse, out-of-bounds), predicted for --device",
}
# the mode a profile or sweep runs when none is named: the fast first look (CLI, sweep, API and MCP alike)
DEFAULT = "event"
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


def reads(name: str) -> tuple[tuple[str, ...], str]:
    """The capture files a mode's backend reads (its ``suffixes``, ``describes``), without importing a built-in."""
    if name in _added:
        return _added[name].suffixes, _added[name].describes
    if name not in BUILT_IN:
        raise UsageError(f"unknown mode {name}; choose one of {', '.join(names())}")
    return READS[name]


def captures() -> str:
    """The capture files `kbench analyze` reads, in words ("Nsight Compute reports (.ncu-rep); ...")."""
    files = [reads(n) for n in names()]
    return "; ".join(dict.fromkeys(describes for suffixes, describes in files if suffixes))


def for_capture(path: Path, mode: str | None) -> Backend:
    """The backend that analyses a capture file: by its suffix, and ``mode`` where several read it. A run's own
    record (report.json, result.json, params.json) is no capture: refused in one line saying what reads it."""
    if path.name in RECORDS:
        raise UsageError(
            f"{path} is a kbench run's {path.name}, not a capture: analyze takes a capture ({captures()}); a run's "
            f"reports are read as they are ({folder.REPORT_JSON}, report.md: `kbench compare`, or the MCP tool "
            "read_report)"
        )
    files = {n: reads(n) for n in names()}
    readers = [n for n, (suffixes, _) in files.items() if path.suffix in suffixes]
    if not readers:
        raise UsageError(f"{path}: kbench analyze reads {captures()}")
    if mode is None:
        return get(readers[0])
    suffixes, describes = reads(mode)  # an unknown mode is refused here
    if mode not in readers:
        what = f"reads {describes}" if suffixes else "reads no capture file"
        raise UsageError(f"--mode={mode} {what}; a {path.suffix} capture is analysed as {' or '.join(readers)} mode")
    return get(mode)


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


def gpu_needed(backend: Backend) -> bool:
    """Whether the mode runs on a GPU: a backend that does not say (one added before ``needs_gpu`` existed) does."""
    return bool(getattr(backend, "needs_gpu", True))
