"""One profiling per GPU at a time: an exclusive file lock per GPU (<state_dir>/gpu<N>.lock), held for the whole
measurement and released by the OS if the process dies. A second kbench waits, saying who holds the GPU (pid,
command, since when), or with ``wait=False`` stops at once with that line. The file is opened as a plain file of
its own, never through a link: one planted there by another user can at worst hold the GPU, never redirect a write.

The lock file is shared by every user's runs and the clock scripts (the state folder is world-writable and sticky,
like /tmp), because two profilers on one GPU spoil each other's counters and timings, whoever runs them. In such a
folder anyone may take a name first: an entry another user left there that cannot serve as the lock (a link, a FIFO,
a file with other names or one no one else may open) cannot be removed by the others either, so instead of stopping
every other user's GPU runs it is passed over: the run holds a lock of its user's own (gpu<N>.lock in the private
folder fsutil.user_folder gives), says so in one line, and still waits for the same user's other runs. An unusable
entry of one's own is refused with a line saying to remove it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shlex
import stat
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

from kbench import fsutil
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


def _shared(path: Path) -> int:
    """The shared lock file, for writing where this user may, else for reading (another user's file: flock needs no
    write access, the holder line is then not written); ConfigError where it cannot serve as the lock."""
    try:
        return open_plain(path, os.O_RDWR | os.O_CREAT)
    except PermissionError:
        pass
    try:
        return open_plain(path, os.O_RDONLY)
    except PermissionError:
        raise ConfigError(f"{path} lets no one else open it: remove it") from None


def _why_not(st: os.stat_result) -> str:
    """Why an entry cannot be the lock file, from its lstat."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "is not a plain file (a FIFO, socket, device or folder)"
    return "has other names (hard links)" if st.st_nlink != 1 else "lets no one else open it"


def _own(index: int, path: Path, why: str) -> int:
    """A lock of this user's own for GPU ``index`` in the private folder (fsutil.user_folder), in place of the shared
    one at ``path``, which another user's entry makes unusable (``why``); ConfigError where there is none either."""
    where = fsutil.user_folder()
    try:
        os.close(fsutil.private_folder(where))
    except fsutil.NotPrivate as e:
        raise ConfigError(
            f"{path} {why} and is not yours to remove, and a lock of your own cannot be held either ({e}): ask root "
            "to remove it, or set KBENCH_STATE_DIR to a folder of your own"
        ) from None
    return open_plain(Path(os.path.realpath(where)) / f"gpu{index}.lock", os.O_RDWR | os.O_CREAT, 0o600)


def _opened(index: int) -> tuple[int, bool]:
    """The descriptor to lock GPU ``index`` with, and whether it is the lock every user shares: the shared file,
    else (another user's entry there that cannot serve, which this user cannot remove) a lock of this user's own,
    said in one warning line. ConfigError where the entry is this user's own to remove, or no lock can be held."""
    path = lock_path(index)
    try:
        return _shared(path), True
    except ConfigError as e:
        try:
            st = path.lstat()
        except OSError:
            raise e from None
        if st.st_uid == fsutil.me():  # one's own entry: removing it is the fix, as the line says
            raise
        why = _why_not(st)
    fd = _own(index, path, why)
    log.warning(
        "%s %s and belongs to uid %d, so it cannot be the GPU %d lock all users share: holding a lock of your own "
        "instead, which other users' kbench runs do not wait for (ask root to remove that file)",
        path,
        why,
        st.st_uid,
        index,
    )
    return fd, False


@contextlib.contextmanager
def exclusive(index: int, *, wait: bool = True, progress: Callable[[str], None] = log.info) -> Iterator[None]:
    """Hold GPU ``index`` for the block; wait for it (saying so) or, with ``wait=False``, raise GpuBusy."""
    fd, shared = _opened(index)
    try:
        if shared and os.fstat(fd).st_uid == fsutil.me():
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
