"""One profiling per GPU at a time: an exclusive file lock per GPU (<state_dir>/gpu<N>.lock), held for the whole
measurement and released by the OS if the process dies. A second kbench waits, saying who holds the GPU (pid,
command, since when), or with ``wait=False`` stops at once with that line. The file is opened as a plain file of
its own, never through a link: one planted there by another user can at worst hold the GPU, never redirect a write."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

from kbench.errors import ConfigError, KbenchError
from kbench.fsutil import open_plain, state_dir

log = logging.getLogger(__name__)


class GpuBusy(KbenchError):
    exit_code = 9


def lock_path(index: int) -> Path:
    return state_dir() / f"gpu{index}.lock"


def holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it into the file (read through the descriptor kbench opened): another
    user may have written it, so it is shown as plain text of one line, each field cut at HOLDER_CHARS."""
    try:
        h = json.loads(os.pread(fd, 1 << 16, 0) or b"{}")
        pid, command, since = (_plain(str(h[k])) for k in ("pid", "command", "since"))
        return f"kbench pid {pid} (`{command}`) since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another kbench process (it did not say which)"


HOLDER_CHARS = 200


def _plain(text: str) -> str:
    """``text`` on one line of printable characters (a terminal's escape sequences dropped), at most HOLDER_CHARS."""
    shown = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return shown if len(shown) <= HOLDER_CHARS else shown[: HOLDER_CHARS - 3] + "..."


def _opened(path: Path) -> int:
    """The lock file, for writing where this user may, else for reading (another user's file: flock needs no write
    access, the holder line is then not written); ConfigError naming its owner where it cannot be opened at all."""
    try:
        return open_plain(path, os.O_RDWR | os.O_CREAT)
    except PermissionError:
        pass
    try:
        return open_plain(path, os.O_RDONLY)
    except PermissionError:
        owner = path.stat().st_uid
        raise ConfigError(
            f"{path} belongs to uid {owner}, who let no one else open it, so no one can share this GPU's lock: ask "
            "them or root to remove it, or set KBENCH_STATE_DIR to a folder of your own"
        ) from None


@contextlib.contextmanager
def exclusive(index: int, *, wait: bool = True, progress: Callable[[str], None] = log.info) -> Iterator[None]:
    """Hold GPU ``index`` for the block; wait for it (saying so) or, with ``wait=False``, raise GpuBusy."""
    fd = _opened(lock_path(index))
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o666)  # whoever comes next, root or not, can take it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy = f"GPU {index} is busy: {holder(fd)} is profiling on it"
            if not wait:
                raise GpuBusy(f"{busy}; rerun when it is done, or without --no-wait to queue") from None
            progress(f"{busy}; waiting for it (Ctrl-C to give up, --no-wait to not queue)")
            fcntl.flock(fd, fcntl.LOCK_EX)
        info = {
            "pid": os.getpid(),
            "command": shlex.join(sys.orig_argv),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        with contextlib.suppress(OSError):  # EBADF: read-only (another user's file)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
