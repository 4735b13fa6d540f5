"""File writing shared by every layer."""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any


def safe(name: str) -> str:
    """A file or folder name made of letters, digits, '_', '.' and '-' (no separators, never '..')."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.")
    return re.sub(r"\.{2,}", ".", cleaned) or "unknown"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temp file and a rename, so no reader ever sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, default=str)
            f.write("\n")
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def state_dir() -> Path:
    """Where lock state and per-GPU lock files live (shared with the scripts): $KBENCH_STATE_DIR or
    /tmp/kbench-state, world-writable with the sticky bit like /tmp, so a root script and a user run share it."""
    path = Path(os.environ.get("KBENCH_STATE_DIR", "/tmp/kbench-state"))
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            path.chmod(0o1777)
    return path
