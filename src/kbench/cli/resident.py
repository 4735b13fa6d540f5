"""The resident kbench: a warm process per user and GPU that runs `python -m kbench.kernel` commands for the CLI, so
that a second call skips Python's start-up, the imports and the profiler's first session (the MCP server's warm path,
for the command line). This is its client half (``forward``, stdlib only, before anything heavy is imported); the
resident itself is kbench.cli.resident_server.

How a call goes:
- off when KBENCH_RESIDENT is 0/off, and on a machine without an NVIDIA driver unless KBENCH_RESIDENT=1 forces it;
- no resident yet: one is started in the background (a new session in /, no working folder on its import path, its
  log beside its socket) and this call runs in its own fresh process as before;
- a resident: the call's argv, working folder, umask and environment go over its Unix socket; it runs the command as
  a fresh process would (kernel sources changed on disk are loaded afresh: kbench.plan.sources) and streams stdout
  and stderr back, then the exit code. Ctrl-C, SIGTERM and SIGHUP of the client are passed on as the same signal,
  so the command's own cleanup runs (clock reset, run folder marked interrupted);
- a command runs at most once: the resident says it is ready, the client says go, and from then on the command is
  the resident's; if the resident dies before its exit code (a crash in the kernel, a kill, the OOM killer) the
  call says so and exits 5, it is not run again;
- a resident of other code (kbench's files changed, another Python, PYTHONPATH or CUDA_VISIBLE_DEVICES) or one that
  does not answer is told to stop or left, and the call runs in a fresh process: one retry, never a hang.

The socket lives in $XDG_RUNTIME_DIR/kbench or /tmp/kbench-<uid>: every folder from / down to it owned by root or
this user and writable by no one else (unless sticky, as /tmp), itself this user's with mode 0700, opened one folder
at a time and reached through the descriptor held (else no resident, and the call says why). Client and resident
serve only their own user (the peer's credentials, both ways); one resident per socket (a lock it holds for life);
it exits after KBENCH_RESIDENT_IDLE seconds without a command (default 900), on `python -m kbench.kernel
--resident-stop`, or on SIGTERM.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kbench import fsutil
from kbench.errors import KernelError

IDLE_S = 900.0
CONNECT_TIMEOUT_S = 2.0
ACCEPT_WAIT_S = 1.0  # a resident busy with another command for longer: this call runs in its own process
DIED_EXIT = KernelError.exit_code  # the resident died mid-command: as when a kernel crashes its own process
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_held: list[int] = []  # the descriptor of the checked socket folder that folder() returned last


NotPrivate = fsutil.NotPrivate  # the socket's folder, or one above it, could be changed by another user


class Foreign(OSError):
    """The socket is answered by another user's process."""


def wanted() -> bool:
    """Whether calls go through a resident: KBENCH_RESIDENT=1 on, 0/off off, else where an NVIDIA driver is."""
    setting = os.environ.get("KBENCH_RESIDENT", "").strip().lower()
    if setting in ("0", "off", "no", "false"):
        return False
    return setting in ("1", "on", "yes", "true") or Path("/proc/driver/nvidia/version").exists()


def folder() -> Path:
    """The user's private folder for the socket (fsutil.user_folder, created 0700), held open: the path returned
    reaches the folder that was checked (/proc/self/fd/<fd>) even if another is renamed into its name later.
    NotPrivate where it cannot be private (the message names the folder and why)."""
    where = fsutil.user_folder()
    fd = fsutil.private_folder(where)
    held = Path(f"/proc/self/fd/{fd}")
    if not held.is_dir():  # no /proc: the folder by name, every folder above it checked
        os.close(fd)
        return Path(os.path.realpath(where))
    while _held:
        os.close(_held.pop())
    _held.append(fd)
    return held


def search_path() -> str:
    """PYTHONPATH as the folders it names from here: Python reads '' and relative entries against the folder it starts
    in, and the resident starts in /."""
    value = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(str(Path(p).absolute()) for p in value.split(os.pathsep)) if value else ""


def stamp() -> str:
    """What a resident must share with its client: Python, its search path, the GPUs it sees and kbench's own files
    (sizes and modification times)."""
    root = Path(__file__).resolve().parent.parent
    files = sorted(root.rglob("*.py"))
    h = hashlib.sha256()
    h.update(f"PYTHONPATH={search_path()}\n".encode())
    h.update(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}\n".encode())
    h.update(f"{sys.executable}\n{root}\n".encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(root)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def socket_path(where: Path) -> Path:
    gpus = "".join(c if c.isalnum() else "_" for c in os.environ.get("CUDA_VISIBLE_DEVICES", "all")) or "none"
    if len(gpus) > 40:  # GPU UUIDs: a socket's path must stay under 108 bytes
        gpus = hashlib.sha256(gpus.encode()).hexdigest()[:16]
    return where / f"resident-{gpus}.sock"


def peer_uid(conn: socket.socket) -> int | None:
    """The user of the process at the other end of ``conn`` (None where the system does not say)."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    return int(struct.unpack("3i", creds)[1])


def send(conn: socket.socket, **message: Any) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


def messages(conn: socket.socket) -> Iterator[dict[str, Any]]:
    buf = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield json.loads(line)


def forward(argv: list[str]) -> int | None:
    """Run ``argv`` (python -m kbench.kernel's arguments) through the resident: its exit code, or None when this call
    should run in its own process (no resident, or none usable: one is started for the next call where wanted)."""
    if argv[:1] == ["--resident-stop"]:  # whether or not one is wanted here: stop what runs, or say none does
        return _stop()
    if not wanted():
        return None
    try:
        path = socket_path(folder())
    except NotPrivate as e:
        fix = "fix or remove it, or set XDG_RUNTIME_DIR to a private folder (KBENCH_RESIDENT=0 silences this)"
        print(f"kbench: the resident kbench is off (every call starts cold): {e}; {fix}", file=sys.stderr, flush=True)
        return None
    try:
        conn = _connect(path)
    except Foreign as e:
        print(f"kbench: {e}: not using it; this call runs in its own process", file=sys.stderr, flush=True)
        return None
    except OSError:
        _start(path)
        return None
    with conn:
        send(conn, argv=argv, command=sys.orig_argv, cwd=str(Path.cwd()), env=dict(os.environ), umask=_umask(),
             stamp=stamp())  # fmt: skip
        received = messages(conn)
        conn.settimeout(ACCEPT_WAIT_S)
        try:
            first = next(received, None)
        except OSError:  # busy with another call's command (or not answering): this one runs in its own process
            print("kbench: the resident kbench is busy with another command; running this one in its own process",
                  file=sys.stderr, flush=True)  # fmt: skip
            return None
        conn.settimeout(None)
        if first is None or "stale" in first:
            _start(path)  # the one that answered is leaving (or gone): one of this code for the next call
            return None
        try:
            send(conn, go=True)  # from here the command is the resident's: it is never run again here
        except OSError:  # gone before reading it: it ran nothing
            return None
        return _relay(conn, received, fsutil.user_folder() / path.with_suffix(".log").name)


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _connect(path: Path) -> socket.socket:
    """A connection to the resident at ``path`` (OSError where none answers; Foreign where another user does)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_TIMEOUT_S)
        conn.connect(str(path))
        if (uid := peer_uid(conn)) != fsutil.me():
            raise Foreign(f"the resident kbench's socket {fsutil.user_folder() / path.name} answers as uid {uid}")
    except OSError:
        conn.close()
        raise
    return conn


def _relay(conn: socket.socket, received: Iterator[dict[str, Any]], log: Path) -> int:
    """Copy the resident's output here until its exit code; pass this process's signals on to it (sent from the
    handler: the read below is retried after a signal, so a flag would wait for the next output)."""

    def pass_on(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            send(conn, signal=signum)

    old = {s: signal.signal(s, pass_on) for s in FORWARDED}
    try:
        for message in received:
            if "out" in message:
                sys.stdout.write(message["out"])
                sys.stdout.flush()
            if "err" in message:
                sys.stderr.write(message["err"])
                sys.stderr.flush()
            if "exit" in message:
                return int(message["exit"])
    except OSError:
        pass
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    print(f"kbench: error: the resident kbench died while running this command (a crash in the kernel, a kill or the "
          f"out-of-memory killer; its log: {log}); it was not run again", file=sys.stderr, flush=True)  # fmt: skip
    return DIED_EXIT


def _start(path: Path) -> None:
    """A resident in the background for the next call: in /, with no working folder on its import path and PYTHONPATH
    as this call reads it, its log beside the socket. It leaves at once where another resident holds the socket."""
    from kbench.capture.tools import detach, python_module

    env = dict(os.environ)
    if "PYTHONPATH" in env:
        env["PYTHONPATH"] = search_path()
    argv = python_module("kbench.cli.resident_server", path.name)
    detach(argv, path.with_suffix(".log"), cwd=Path("/"), env=env)


def _stop() -> int:
    try:
        with _connect(socket_path(folder())) as conn:
            send(conn, stop=True)
            conn.recv(16)
    except (OSError, NotPrivate):
        print("kbench: no resident kbench is running", file=sys.stderr)
        return 0
    print("kbench: the resident kbench stopped", file=sys.stderr)
    return 0
