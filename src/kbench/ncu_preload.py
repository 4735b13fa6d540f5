"""ncu_report's metric library (libnvperf_host.so) loaded on another core while `kbench analyze` imports its code,
and its SASS disassembler made ready while ncu mode waits on ncu.

The first metric ncu_report reads makes it dlopen that library, and loading it (157 MB mapped, its initialisers
run) costs more than a bare ``ncu_report.load_report`` of a small report: 71 ms on this 2-core machine, ~0.1 s
on the H100 machine. ncu_report's own dlopen holds Python's lock, and so does ``ctypes.CDLL``; libc's ``dlopen``
called through ctypes releases it, so the library loads in a thread while kbench's pure-Python modules import, and
ncu_report's later dlopen of the same file finds it loaded.

The dynamic loader serialises dlopen calls, so an extension module imported while the library loads would wait
for all of it (measured: the imports then took 0.09 s longer, no gain). The extension modules the analysis imports
are therefore imported first (``EXTENSIONS``; a test fails when the analysis of an .ncu-rep imports one that is not
listed). The library also has thread-local storage: once the loader has mapped it, the first thread-local access
of another loaded library waits for the loader to finish too. pydantic_core's first call makes one (seen with perf
on this 2-core machine: the main thread slept 30 ms in glibc's lock under the first SchemaSerializer), and every
pydantic model calls it. What the analysis imports anyway and that never reaches pydantic_core (``WHILE_LOADING``:
jinja2, importlib.metadata for pydantic's plugin lookup, pydantic's pure-Python dependencies) is therefore imported
while the library loads, before kbench's models: the main thread then did not sleep at all, and `kbench analyze`
of an H100 capture took 0.310 s instead of 0.339 s here (medians of 41). The flags are ncu_report's own
(RTLD_LAZY | RTLD_DEEPBIND: LD_DEBUG=scopes shows the library's own scope first either way), so the library is
bound as it would have been. Best effort: where anything is missing (another OS, no ncu_report, another layout)
nothing is preloaded and ncu_report loads the library itself, as before.

ncu_report readies its SASS disassembler on the first SASS text it returns in a process, whatever the report: 0.54 s
on the H100 machine (0.4 s here), most of what ncu mode spent on its deep dive after ncu had finished (the SASS of
each stage, sass/*.csv). ``warm_sass`` does that first read on a report of kbench's own (``SASS_WARMUP``: one tiny
Triton kernel, 63 KB, captured on the H100 with only ncu's SourceCounters section; tests/data/kbench_h100 has its
kernel) in a thread while ncu runs; the stage's own first read then took 0.002 s on the H100 machine. The read holds
Python's lock for that time: the clock sampler skips those samples, which fall while ncu starts the profiled
process, before any kernel runs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

from kbench import metric_libraries

LIBRARY = "libnvperf_host.so"
SASS_WARMUP = Path(__file__).with_name("sass_warmup.ncu-rep")
SUFFIX = ".ncu-rep"  # the captures ncu_report reads
# Extension modules (shared libraries on CPython builds that do not build them in) that `kbench analyze` of an
# .ncu-rep imports, each imported before the library starts loading; where one is built in, importing it is free.
EXTENSIONS = (
    "_bisect",
    "_blake2",
    "_bz2",
    "_contextvars",
    "_csv",
    "_datetime",
    "_decimal",
    "_hashlib",
    "_json",
    "_lzma",
    "_pickle",
    "_random",
    "_sha2",
    "_sha512",
    "_socket",
    "_sqlite3",
    "_statistics",
    "_struct",
    "_uuid",
    "_zoneinfo",
    "array",
    "binascii",
    "markupsafe._speedups",
    "math",
    "mmap",
    "pydantic_core._pydantic_core",
    "select",
    "zlib",
)


# Pure-Python modules that the analysis of an .ncu-rep imports anyway and that neither import nor call pydantic_core,
# costliest first; imported while the library loads (a test checks both)
WHILE_LOADING = (
    "jinja2",
    "importlib.metadata",
    "annotated_types",
    "typing_inspection.introspection",
    "typing_extensions",
    "uuid",
    "logging",
    "json",
)


def library() -> Path | None:
    """The metric library beside ncu_report's module, found without importing ncu_report; None where there is
    none."""
    try:
        spec = importlib.util.find_spec("ncu_report")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / LIBRARY
    return path if path.is_file() else None


def start(capture: Path) -> threading.Thread | None:
    """When ``capture`` is an Nsight Compute report, import ``EXTENSIONS``, begin loading the metric library in a
    daemon thread and import ``WHILE_LOADING`` meanwhile; the thread, or None when there is nothing to load."""
    if capture.suffix != SUFFIX or not sys.platform.startswith("linux"):
        return None
    path = library()
    if path is None:
        return None
    _import_each(EXTENSIONS)
    thread = threading.Thread(target=_dlopen, args=(path,), name="kbench-nvperf-preload", daemon=True)
    thread.start()
    _import_each(WHILE_LOADING)
    return thread


def _import_each(names: tuple[str, ...]) -> None:
    for name in names:
        # not on this Python, or its package missing: the analysis says so itself when it needs it
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _dlopen(path: Path) -> None:
    metric_libraries.claim_if_sampling_may_follow()  # CUPTI's copy first: a process that samples later must get it
    metric_libraries.dlopen(path, os.RTLD_LAZY | os.RTLD_DEEPBIND)  # kept loaded: ncu_report uses it next


def warm_sass() -> threading.Thread | None:
    """Ready ncu_report's SASS disassembler in a daemon thread (see the module's text); the thread, or None where
    ncu_report or the warm-up report is missing."""
    if not SASS_WARMUP.is_file() or library() is None:
        return None
    thread = threading.Thread(target=first_sass, args=(SASS_WARMUP,), name="kbench-sass-warmup", daemon=True)
    thread.start()
    return thread


def first_sass(capture: Path) -> str:
    """The SASS of the first instruction of the first kernel in ``capture`` that ncu's source counters saw ('' where
    there is none, or no report ncu_report can read: the analysis names such a report itself)."""
    metric_libraries.claim_if_sampling_may_follow()  # CUPTI's copy before ncu_report's (kbench.metric_libraries)
    try:
        import ncu_report

        report = ncu_report.load_report(str(capture))
    except (ImportError, OSError, RuntimeError):
        return ""
    first = report.range_by_idx(0) if report.num_ranges() else None
    action = first.action_by_idx(0) if first is not None and first.num_actions() else None
    executed = action.metric_by_name("inst_executed") if action is not None else None
    if action is None or executed is None or not executed.has_correlation_ids():
        return ""
    return str(action.sass_by_pc(int(executed.correlation_ids().as_uint64(0)))).strip()
