"""The resident kbench: a warm process per user and GPU that runs `python -m kbench.kernel` commands for the CLI, so
that a second call skips Python's start-up, the imports and the profiler's first session (the MCP server's warm path,
for the command line).

How a call goes (``forward``, stdlib only, before anything heavy is imported):
- off when KBENCH_RESIDENT is 0/off, and on a machine without an NVIDIA driver unless KBENCH_RESIDENT=1 forces it;
- no resident yet: one is started in the background (a new session, its log beside its socket) and this call runs
  in its own fresh process as before;
- a resident: the call's argv, working folder and environment go over its Unix socket; it runs the command as a
  fresh process would (kernel sources changed on disk are loaded afresh: kbench.plan.sources) and streams stdout and
  stderr back, then the exit code. Ctrl-C, SIGTERM and SIGHUP of the client are passed on as the same signal, so the
  command's own cleanup runs (clock reset, run folder marked interrupted);
- a resident of other code (kbench's files changed, another Python, PYTHONPATH or CUDA_VISIBLE_DEVICES) or one that
  does not answer is told to stop or left, and the call runs in a fresh process: one retry, never a hang.

The socket lives in $XDG_RUNTIME_DIR/kbench or /tmp/kbench-<uid>, a folder only its owner may enter (checked, else
no resident); the resident serves only its own user (the peer's credentials), one command at a time, and exits after
KBENCH_RESIDENT_IDLE seconds without one (default 900), on `python -m kbench.kernel --resident-stop`, or on SIGTERM.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import socket
import stat
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

IDLE_S = 900.0
CONNECT_TIMEOUT_S = 2.0
ACCEPT_WAIT_S = 1.0  # a resident busy with another command for longer: this call runs in its own process
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def wanted() -> bool:
    """Whether calls go through a resident: KBENCH_RESIDENT=1 on, 0/off off, else where an NVIDIA driver is."""
    setting = os.environ.get("KBENCH_RESIDENT", "").strip().lower()
    if setting in ("0", "off", "no", "false"):
        return False
    return setting in ("1", "on", "yes", "true") or Path("/proc/driver/nvidia/version").exists()


def folder() -> Path | None:
    """The user's private folder for the socket (created 0700), or None where it is not private."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    where = Path(base) / "kbench" if base else Path(f"/tmp/kbench-{os.getuid()}")
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = where.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return where


def stamp() -> str:
    """What a resident must share with its client: Python, its search path, the GPUs it sees and kbench's own files
    (sizes and modification times)."""
    root = Path(__file__).resolve().parent.parent
    files = sorted(root.rglob("*.py"))
    h = hashlib.sha256()
    for key in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES"):
        h.update(f"{key}={os.environ.get(key, '')}\n".encode())
    h.update(f"{sys.executable}\n{root}\n".encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(root)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def socket_path(where: Path) -> Path:
    gpus = "".join(c if c.isalnum() else "_" for c in os.environ.get("CUDA_VISIBLE_DEVICES", "all")) or "none"
    return where / f"resident-{gpus}.sock"


def _send(conn: socket.socket, **message: Any) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


def _messages(conn: socket.socket) -> Iterator[dict[str, Any]]:
    buf = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield json.loads(line)


# ---------------------------------------------------------------------------------------------------------- client


def forward(argv: list[str]) -> int | None:
    """Run ``argv`` (python -m kbench.kernel's arguments) through the resident: its exit code, or None when this call
    should run in its own process (no resident, or none usable: one is started for the next call where wanted)."""
    if argv[:1] == ["--resident-stop"]:  # whether or not one is wanted here: stop what runs, or say none does
        where = folder()
        return _stop(socket_path(where)) if where is not None else _stop(None)
    if not wanted() or (where := folder()) is None:
        return None
    path = socket_path(where)
    try:
        conn = _connect(path)
    except OSError:
        _start(path)
        return None
    with conn:
        _send(conn, argv=argv, command=sys.orig_argv, cwd=str(Path.cwd()), env=dict(os.environ), stamp=stamp())
        messages = _messages(conn)
        conn.settimeout(ACCEPT_WAIT_S)
        try:
            first = next(messages, None)
        except OSError:  # busy with another call's command (or not answering): this one runs in its own process
            print("kbench: the resident kbench is busy with another command; running this one in its own process",
                  file=sys.stderr, flush=True)  # fmt: skip
            return None
        conn.settimeout(None)
        if first is None or "stale" in first:
            _start(path)  # the one that answered is leaving (or gone): one of this code for the next call
            return None
        return _relay(conn, messages)


def _connect(path: Path) -> socket.socket:
    """A connection to the resident at ``path`` (OSError where none answers)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_TIMEOUT_S)
        conn.connect(str(path))
    except OSError:
        conn.close()
        raise
    return conn


def _relay(conn: socket.socket, messages: Iterator[dict[str, Any]]) -> int | None:
    """Copy the resident's output here until its exit code; pass this process's signals on to it (sent from the
    handler: the read below is retried after a signal, so a flag would wait for the next output)."""

    def pass_on(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            _send(conn, signal=signum)

    old = {s: signal.signal(s, pass_on) for s in FORWARDED}
    try:
        for message in messages:
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
    # the resident went away without an exit code: this call runs again in its own process
    print("kbench: the resident kbench stopped mid-command; running it in a fresh process", file=sys.stderr, flush=True)
    return None


def _start(path: Path) -> None:
    """A resident in the background for the next call (its log beside the socket); any stale socket goes first."""
    with contextlib.suppress(OSError):
        path.unlink()
    from kbench.capture.tools import detach

    detach([sys.executable, "-m", "kbench.cli.resident", str(path)], path.with_suffix(".log"))


def _stop(path: Path | None) -> int:
    try:
        if path is None:
            raise OSError("no private folder for a resident's socket")
        with _connect(path) as conn:
            _send(conn, stop=True)
            conn.recv(16)
    except OSError:
        print("kbench: no resident kbench is running", file=sys.stderr)
        return 0
    print("kbench: the resident kbench stopped", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------------------- server


class _Stream(io.TextIOBase):
    """stdout or stderr of a command the resident runs: each write goes to the client as one message."""

    def __init__(self, conn: socket.socket, key: str) -> None:
        self.conn, self.key = conn, key

    def write(self, text: str | bytes) -> int:  # click writes bytes to some streams
        if text:
            shown = text.decode(errors="replace") if isinstance(text, bytes) else text
            _send(self.conn, **{self.key: shown})
        return len(text)

    def isatty(self) -> bool:
        return False


def _gone(conn: socket.socket) -> bool:
    """Whether the client closed its end (nothing left to read but the end)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _peer_uid(conn: socket.socket) -> int | None:
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    return int(struct.unpack("3i", creds)[1])


def _signals(conn: socket.socket, main: int, done: threading.Event) -> None:
    """While a command runs: a signal the client passes on, or the client gone, interrupts it as that signal."""
    with contextlib.suppress(OSError, ValueError):
        for message in _messages(conn):
            if "signal" in message and not done.is_set():
                signal.pthread_kill(main, int(message["signal"]))
        if not done.is_set():
            signal.pthread_kill(main, signal.SIGINT)


@contextlib.contextmanager
def _as_client(request: dict[str, Any], conn: socket.socket) -> Iterator[None]:
    """The command's process state as the client's: working folder, environment, stdout and stderr, and its command
    line (sys.orig_argv: what a run folder's params.json and the GPU lock's holder line record)."""
    cwd, env, command = Path.cwd(), dict(os.environ), sys.orig_argv
    out, err = sys.stdout, sys.stderr
    sys.orig_argv = list(request["command"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdout, sys.stderr = _Stream(conn, "out"), _Stream(conn, "err")
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.orig_argv = command


def _run(request: dict[str, Any], conn: socket.socket) -> int:
    from kbench.cli.kernel import main

    done = threading.Event()
    watcher = threading.Thread(target=_signals, args=(conn, threading.get_ident(), done), daemon=True)
    code = 0
    with _as_client(request, conn):
        watcher.start()
        try:
            main(list(request["argv"]))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException as e:  # the resident outlives any command; the client gets a line
            print(f"kbench: internal error in the resident: {type(e).__name__}: {e}", file=sys.stderr)
            code = 70
        finally:
            done.set()
            _release_gpu_memory()
    print(f"served: {' '.join(request['argv'])[:200]} (exit {code})", flush=True)  # the resident's log
    return code


def _release_gpu_memory() -> None:
    """The caching allocator's free blocks back to the GPU between commands (a resident holds its context only)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            torch.cuda.empty_cache()


def _leave(signum: int, frame: object) -> None:
    raise SystemExit(0)


def serve(path: Path, idle_s: float) -> None:
    """Serve commands on ``path`` until idle for ``idle_s`` seconds, told to stop, or sent SIGTERM."""
    mine = stamp()
    old_mask = os.umask(0o077)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))  # another resident bound it first: leave it to that one
        mine_ino = path.stat().st_ino
    except OSError:
        return
    finally:
        os.umask(old_mask)
    server.listen(4)
    server.settimeout(idle_s)
    path.with_suffix(".pid").write_text(f"{os.getpid()}\n")
    signal.signal(signal.SIGTERM, _leave)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # between commands: a late pass-on from a client that is gone
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return
            with conn:
                if _peer_uid(conn) not in (None, os.getuid()):
                    continue
                request = next(_messages(conn), None)
                if request is None:
                    continue
                if request.get("stop"):
                    _send(conn, stopped=True)
                    return
                if request.get("stamp") != mine:
                    _send(conn, stale="another kbench, Python or environment")
                    return
                if _gone(conn):  # it waited past ACCEPT_WAIT_S and runs in its own process
                    continue
                _send(conn, accepted=True)
                code = _run(request, conn)
                with contextlib.suppress(OSError):
                    _send(conn, exit=code)
    finally:
        server.close()
        with contextlib.suppress(OSError):
            if path.stat().st_ino == mine_ino:  # not a successor's socket, bound after this one left
                path.unlink()
                path.with_suffix(".pid").unlink()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(os.environ.get("KBENCH_RESIDENT_IDLE", IDLE_S)))
