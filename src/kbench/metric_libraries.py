"""Which copy of NVIDIA's metric libraries (libnvperf_host.so, libnvperf_target.so) a process's CUPTI uses.

CUPTI opens them by bare name, so the dynamic loader hands it any library of that name already in the process, else
the first on its search path. Several copies of different releases can reach a kbench process: the one beside the
libcupti that cupti-python loads, ncu_report's (Nsight Compute's, loaded by path when a capture is read or its SASS
warmed) and a CUDA toolkit's (/usr/local/cuda on LD_LIBRARY_PATH). Measured on the lent H200 (driver 580.159.04,
cupti-python 13.4 with CUPTI 13.4, ncu_report 2025.3.1; scripts/metric-library-order.py, 3 processes of 8 rounds
each): PM sampling
with ncu_report's copy loaded first, or with the toolkit's 13.0 copy, raised the driver's assertion
`pSmIssueThrottleCtrl != NULL` in every process; with CUPTI's own copy loaded first, in none. The resident kbench
that crashed (segfault in libstdc++ seconds after that assertion) ran event mode after an annotation command had
loaded ncu_report's copy into it.

``claim`` therefore loads CUPTI's own copies by path before anything else loads one: the loader then answers CUPTI's
lookups by name with them, while ncu_report, which opens its copy by path, gets its own beside them. Where another
copy came first, sampling must not run in this process (``claim`` says why). Callers: every sampler; ncu_preload
(before it loads ncu_report's copy), pipeline.analyze and MCP's analyze where sampling may follow; stdlib only but
for the binding it asks.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

NAMES = ("libnvperf_host.so", "libnvperf_target.so")
DRIVER = Path("/proc/driver/nvidia/version")
MAPS = Path("/proc/self/maps")

_lock = threading.Lock()
_claimed: list[str | None] = []  # the answer of this process's claim, once made


def mapped(maps: str) -> list[Path]:
    """The metric libraries a /proc/<pid>/maps text shows loaded, each once, in the order first seen."""
    seen: dict[Path, None] = {}
    for _, _, path in _files(maps):
        if path.name in NAMES:
            seen.setdefault(path, None)
    return list(seen)


def _files(maps: str) -> Iterator[tuple[int, int, Path]]:
    """Each file mapping of a /proc/<pid>/maps text: its address range and path."""
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)  # address range, perms, offset, device, inode, path (where one is mapped)
        if len(fields) == 6 and "-" in fields[0]:
            low, high = fields[0].split("-", 1)
            yield int(low, 16), int(high, 16), Path(fields[5].strip())


def plan(loaded: list[Path], cupti_dir: Path, present: list[str]) -> tuple[list[Path], str | None]:
    """What to load by path (CUPTI's own copies not yet loaded), or why sampling must not run: another copy of a
    library CUPTI opens by name is loaded already, and the loader would hand CUPTI that one. ``present``: which of
    ``NAMES`` lie in ``cupti_dir``."""
    have = {p.name for p in loaded if p.parent == cupti_dir}
    # /proc/self/maps lists by address, not by load order: a foreign copy beside CUPTI's own is one loaded after it
    # (CUPTI never opens its own by path, only this module does, first)
    foreign = [p for p in loaded if p.parent != cupti_dir and p.name in present and p.name not in have]
    if foreign:
        others = ", ".join(str(p) for p in foreign)
        return [], (
            f"another copy of NVIDIA's metric library was loaded in this process before CUPTI's ({others}; CUPTI's "
            f"is in {cupti_dir}), and CUPTI would drive the GPU's counters with it (a driver assertion and crashes "
            "seen on the H100): PM sampling is skipped in this process; a fresh process samples"
        )
    return [cupti_dir / n for n in NAMES if n in present and n not in have], None


def holder(maps: str, address: int) -> Path | None:
    """The file a /proc/<pid>/maps text shows mapped at ``address`` (None: no file there)."""
    return next((path for low, high, path in _files(maps) if low <= address < high), None)


def cupti_dir() -> Path | None:
    """The folder of the libcupti that cupti-python calls: made to load it as its first call would, then found by
    where its functions lie in this process (a CUDA build of torch may bring another copy, and which one the
    binding's search takes depends on what is loaded already); None where there is no NVIDIA driver, no binding,
    or it does not say."""
    if not DRIVER.exists():
        return None
    try:
        pointers = _binding_pointers()
        maps = MAPS.read_text()
    except Exception:  # no binding, another binding release, no driver answering: the sampler reports what fails itself
        return None
    for address in pointers.values():
        if address and (path := holder(maps, int(address))) is not None and path.name.startswith("libcupti"):
            return Path(os.path.realpath(path)).parent
    return None


def claim_if_sampling_may_follow() -> None:
    """``claim`` in a process that has loaded torch (the resident, the MCP server, a notebook: one that profiles and
    may sample after reading a capture); nothing in a one-shot `kbench analyze`, which never samples and would pay
    for loading CUPTI (the binding, the driver, the metric library: 0.3-0.5 s on the H200)."""
    if "torch" in sys.modules:
        claim()


def _binding_pointers() -> dict[str, int]:
    """cupti-python's CUPTI function pointers by name (ImportError without the binding); asking loads its libcupti,
    as its first call would."""
    internal = importlib.import_module("cupti._internal.cupti")
    return dict(internal._inspect_function_pointers())


def claim() -> str | None:
    """Load CUPTI's own metric libraries by path before any other copy (see the module); None when that holds (or
    there is no CUPTI here to care), else why PM sampling must not run in this process. Once per process; safe from
    any thread."""
    with _lock:
        if not _claimed:
            _claimed.append(_claim())
        return _claimed[0]


def _claim() -> str | None:
    where = cupti_dir()
    if where is None:
        return None
    try:
        maps = MAPS.read_text()
    except OSError:  # no /proc: nothing to check against
        return None
    todo, why = plan(mapped(maps), where, [n for n in NAMES if (where / n).is_file()])
    for path in todo:
        dlopen(path, os.RTLD_LAZY)
    return why


def dlopen(path: Path, flags: int) -> None:
    """libc's dlopen of ``path``, kept loaded; called through ctypes it releases Python's lock (``ctypes.CDLL`` and
    extension imports hold it), so a thread can load a large library while the main thread imports. Best effort:
    a library that does not load is reported by whoever needs it."""
    with contextlib.suppress(OSError, AttributeError):
        call = ctypes.CDLL(None).dlopen
        call.restype, call.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
        call(os.fsencode(path), flags)
