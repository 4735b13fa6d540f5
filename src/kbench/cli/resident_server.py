"""The resident kbench itself (its client half and how a call goes: kbench.cli.resident). Started by a client as
`python -P -m kbench.cli.resident_server <socket name>` in /, it finds its socket folder as the client does (checked
from / down), takes the socket's lock for its life, and serves commands on it one at a time."""

from __future__ import annotations

import contextlib
import faulthandler
import fcntl
import io
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kbench.cli.resident import CONNECT_TIMEOUT_S, IDLE_S, NotPrivate, folder, messages, peer_uid, send, stamp
from kbench.working_folder import without_working_folder

LOCK_WAIT_S = 3.0  # a resident that just answered 'stale' or 'stopped' is leaving: its successor waits this long


class _Stream(io.TextIOBase):
    """stdout or stderr of a command the resident runs: each write goes to the client as one message."""

    def __init__(self, conn: socket.socket, key: str) -> None:
        self.conn, self.key = conn, key

    def write(self, text: str | bytes) -> int:  # click writes bytes to some streams
        if text:
            shown = text.decode(errors="replace") if isinstance(text, bytes) else text
            send(self.conn, **{self.key: shown})
        return len(text)

    def isatty(self) -> bool:
        return False


def _signals(received: Iterator[dict[str, Any]], main: int, done: threading.Event) -> None:
    """While a command runs: a signal the client passes on, or the client gone, interrupts it as that signal."""
    with contextlib.suppress(OSError, ValueError):
        for message in received:
            if "signal" in message and not done.is_set():
                signal.pthread_kill(main, int(message["signal"]))
        if not done.is_set():
            signal.pthread_kill(main, signal.SIGINT)


@contextlib.contextmanager
def _as_client(request: dict[str, Any], conn: socket.socket) -> Iterator[None]:
    """The command's process state as the client's: working folder, umask, environment, stdout and stderr, and its
    command line (sys.orig_argv: what a run folder's params.json and the GPU lock's holder line record)."""
    cwd, env, command = Path.cwd(), dict(os.environ), sys.orig_argv
    out, err = sys.stdout, sys.stderr
    sys.orig_argv = list(request["command"])
    os.chdir(request["cwd"])
    mask = os.umask(int(request["umask"]) & 0o777)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdout, sys.stderr = _Stream(conn, "out"), _Stream(conn, "err")
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
        os.environ.clear()
        os.environ.update(env)
        os.umask(mask)
        os.chdir(cwd)
        sys.orig_argv = command


def _run(request: dict[str, Any], conn: socket.socket, received: Iterator[dict[str, Any]]) -> int:
    from kbench.cli.kernel import main

    done = threading.Event()
    watcher = threading.Thread(target=_signals, args=(received, threading.get_ident(), done), daemon=True)
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


def _sole(path: Path) -> int | None:
    """The lock that makes this the one resident on ``path``, to hold for its life (None: another resident holds it)."""
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


def serve(path: Path, idle_s: float) -> None:
    """Serve commands on ``path`` until idle for ``idle_s`` seconds, told to stop, or sent SIGTERM."""
    mine = stamp()
    if _sole(path) is None:
        print(f"another resident already serves {path.name}: leaving", flush=True)
        return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by a resident that died: under the lock no live one owns it
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o077)
    try:
        server.bind(str(path))
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
                try:
                    conn.settimeout(CONNECT_TIMEOUT_S)
                    if peer_uid(conn) != os.getuid():
                        continue
                    received = messages(conn)
                    request = next(received, None)
                    if request is None:
                        continue
                    if request.get("stop"):
                        send(conn, stopped=True)
                        return
                    if request.get("stamp") != mine:
                        send(conn, stale="another kbench, Python or environment")
                        return
                    send(conn, ready=True)
                    if next(received, {}).get("go") is not True:  # it waited past ACCEPT_WAIT_S: it runs it itself
                        continue
                    conn.settimeout(None)
                except (OSError, ValueError):
                    continue
                code = _run(request, conn, received)
                with contextlib.suppress(OSError):
                    send(conn, exit=code)
    finally:
        server.close()
        with contextlib.suppress(OSError):  # still under the lock: no successor has bound it
            path.unlink()
            path.with_suffix(".pid").unlink()


def import_path(path: list[str], start: str, safe_path: bool) -> list[str]:
    """The resident's import path: no working folder on it (Python 3.10 has no -P and puts the folder it started in
    first under -m), nor any relative entry, which would name the folder a served command runs in."""
    return [p for p in without_working_folder(path, start, safe_path) if Path(p).is_absolute()]


def main() -> None:
    sys.path[:] = import_path(sys.path, str(Path.cwd()), bool(getattr(sys.flags, "safe_path", False)))
    name = sys.argv[1]
    try:
        where = folder()
    except NotPrivate as e:
        print(f"no resident: {e}", flush=True)
        return
    if Path(name).name == name and name.startswith("resident-"):
        faulthandler.enable()  # a crash in a library leaves the Python stacks in the resident's log
        serve(where / name, float(os.environ.get("KBENCH_RESIDENT_IDLE", IDLE_S)))


if __name__ == "__main__":
    main()
