"""File writing, the state folder and process liveness, shared by every layer."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def safe(name: str) -> str:
    """A file or folder name made of letters, digits, '_', '.' and '-' (no separators, never '..')."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.")
    return re.sub(r"\.{2,}", ".", cleaned) or "unknown"


@functools.cache
def _file_mode() -> int:
    """The mode a plainly created file gets here (0666 less the umask): temp files start at 0600."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write a file through a temp file beside it and a rename: no reader (an agent, the next run) ever sees half a
    file, and a write that fails (disk full, a file-size limit) leaves nothing under the final name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        Path(tmp).chmod(_file_mode())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda f: f.write(text.encode()))


def write_json_atomic(path: Path, data: Any) -> None:
    """JSON, written atomically."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def copy_atomic(src: Path, dst: Path) -> None:
    """A copy of ``src`` (its times kept) that appears whole or not at all."""

    def copy(f: IO[bytes]) -> None:
        with src.open("rb") as r:
            shutil.copyfileobj(r, f, 1 << 20)

    write_atomic(dst, copy)
    with contextlib.suppress(OSError):
        shutil.copystat(src, dst)


def read_nofollow(path: Path, dir_fd: int | None = None) -> bytes:
    """A regular file's bytes, never through a symbolic link in its last component (kbench writes its files by
    rename, never as links: a link there was planted) and never a FIFO or device (it would block or never end)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return f.read()


def read_beneath(root: Path, path: Path) -> bytes:
    """``path`` (resolved, inside the resolved folder ``root``) read by walking down from ``root`` one folder at a
    time without following any symbolic link: a link swapped in after the path was checked is refused, not followed."""
    parts = path.relative_to(root).parts
    if not parts:
        raise OSError(f"{path} is a folder, not a file")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = below
        return read_nofollow(Path(parts[-1]), dir_fd=fd)
    finally:
        os.close(fd)


def json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object kbench wrote (params.json, predicted.json, a tiling record), read as ``read_nofollow`` does;
    None when it is missing, a link, unreadable, malformed, nested deeper than the parser goes, or not an object."""
    try:
        data = json.loads(read_nofollow(path))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def state_dir() -> Path:
    """Where lock state and per-GPU lock files live (shared with the scripts): $KBENCH_STATE_DIR or
    /tmp/kbench-state, world-writable with the sticky bit like /tmp, so a root script and a user run share it."""
    path = Path(os.environ.get("KBENCH_STATE_DIR", "/tmp/kbench-state"))
    if not path.is_dir():
        from kbench.errors import ConfigError

        if path.exists():
            raise ConfigError(f"KBENCH_STATE_DIR={path} is not a folder; point it at a folder kbench may write")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create the state folder {path} (KBENCH_STATE_DIR): {e.strerror}") from None
        with contextlib.suppress(OSError):
            path.chmod(0o1777)
    return path


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
