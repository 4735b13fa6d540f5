"""What kbench may spend on a file it reads but did not just write: each kind of capture has a size limit, checked
before the file is opened (KBENCH_MAX_CAPTURE_MB raises it), and JSON is read so that a file nested too deeply or
not JSON at all is a malformed input (exit 4), never a kbench bug (exit 70)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, BinaryIO

from kbench.errors import ConfigError, UsageError, first_line

LIMIT_ENV = "KBENCH_MAX_CAPTURE_MB"
MB = 1 << 20
# The most kbench reads of each kind, in MB: far above real captures (ncu's full set is ~1.5 MB per kernel, an
# unfiltered capture of 20 kernels ~60 MB; kbench's timelines of a plan are under 1 MB), below what exhausts memory
# (ncu_report took 30 times a report's size; JSON becomes Python objects about 10 times its size)
LIMIT_MB = {".ncu-rep": 1024, ".sqlite": 1024, ".json": 256, ".hatchet": 256}
KIND = {
    ".ncu-rep": "an Nsight Compute report",
    ".sqlite": "an nsys SQLite export",
    ".json": "a JSON file",
    ".hatchet": "a Proton profile",
}
OTHER = ".json"  # any other file kbench reads is JSON (params.json, tiling/<stage>.json, ...)


class TooLarge(UsageError):
    """A file over its kind's size limit: refused before it is read (exit 2, a capture kbench does not read)."""


def limit_mb(suffix: str) -> float:
    """The size limit of a file kind in MB: KBENCH_MAX_CAPTURE_MB when set (it applies to every kind), else the
    kind's own."""
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return float(LIMIT_MB.get(suffix, LIMIT_MB[OTHER]))
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{LIMIT_ENV}={raw} is not a size in MB above 0; set a number such as 4096, or unset it")
    return value


def check_size(path: Path, size: int | None = None) -> int:
    """``path``'s size in bytes (``size``: as an open descriptor of it says); TooLarge when it is over the limit of
    its kind (OSError when it cannot be read)."""
    size = path.stat().st_size if size is None else size
    limit = limit_mb(path.suffix)
    if size > limit * MB:
        kind = KIND.get(path.suffix, KIND[OTHER])
        raise TooLarge(
            f"{path} is {size / MB:,.0f} MB, over the {limit:,.0f} MB kbench reads of {kind}; set "
            f"{LIMIT_ENV} to a larger number of MB to read it anyway (it applies to every kind of file)"
        )
    return size


def read_limited(f: BinaryIO, path: Path) -> bytes:
    """The bytes of the open plain file ``f`` (named ``path``), once its size passed ``check_size``, never more than
    the limit allows (a file of /proc says it holds 0 bytes and may hold more)."""
    check_size(path, os.fstat(f.fileno()).st_size)
    data = f.read(math.floor(limit_mb(path.suffix) * MB) + 1)
    check_size(path, len(data))
    return data


def read_json(path: Path, what: str = "valid JSON") -> Any:
    """The JSON value in ``path``, read once its size passed ``check_size``; ConfigError "<path> is not <what>: why"
    when it is not JSON or nests deeper than Python parses (OSError when it cannot be read)."""
    check_size(path)
    data = path.read_bytes()
    try:
        return json.loads(data)
    except RecursionError:
        raise ConfigError(f"{path} is not {what}: its JSON is nested too deeply") from None
    except ValueError as e:  # not JSON, not UTF-8, or an integer too long to convert
        raise ConfigError(f"{path} is not {what}: {first_line(e)}") from None
