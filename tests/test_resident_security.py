"""The resident kbench against a hostile folder (issue 41): its import path and working folder are fixed, its socket
folder is checked from the top and held, it answers only as this user, one runs per socket, a command runs at most
once, in the caller's umask, and a resident that cannot be private says why."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbench import fsutil
from kbench.cli import resident, resident_server
from tests.test_resident import served, wait_for

HAS_PROC_FD = Path("/proc/self/fd").is_dir()


def kernel(args: list[str], env: dict[str, str], cwd: Path, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbench.kernel", *args],
        env=env, cwd=cwd, umask=umask, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def package(root: Path, name: str, body: str) -> Path:
    """A kernel path holding one package whose import runs ``body`` (kbench.kernel --list imports it)."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(f"import os\n{body}\n")
    return root


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "KBENCH_RESIDENT": "1", "XDG_RUNTIME_DIR": str(runtime), "KBENCH_RESIDENT_IDLE": "60"}
    yield env
    kernel(["--resident-stop"], env, tmp_path)


def started(env: dict[str, str]) -> Path:
    """The resident's folder, once the resident a first call started answers."""
    where = Path(env["XDG_RUNTIME_DIR"]) / "kbench"
    wait_for(where / "resident-all.pid")
    return where


@pytest.mark.slow
def test_a_module_planted_in_the_first_callers_folder_never_runs_in_the_resident(
    tmp_path: Path, env: dict[str, str]
) -> None:
    first, later = tmp_path / "first", tmp_path / "later"
    first.mkdir()
    later.mkdir()
    assert kernel(["--list"], env, first).returncode == 0  # starts the resident from `first`
    where = started(env)
    planted = tmp_path / "planted-ran"
    for where_planted in (first, later):  # after the resident started; nor is a served command's folder on its path
        (where_planted / "typer.py").write_text(f"open({str(planted)!r}, 'w').close()\n")
    call = kernel(["--list"], env, later)  # the resident's first served command imports typer
    assert not planted.exists()
    assert call.returncode == 0 and "mla_decode" in call.stdout
    assert served(where / "resident-all.log") == ["served: --list (exit 0)"]


def test_the_resident_imports_nothing_from_a_working_folder() -> None:
    # Python 3.10 has no -P: the folder it started in (first on the path under -m) and any relative entry go
    path = ["/srv/start", "", "rel", "/venv/lib/site-packages"]
    assert resident_server.import_path(path, start="/srv/start", safe_path=False) == ["/venv/lib/site-packages"]
    assert resident_server.import_path(path[1:], start="/srv/start", safe_path=True) == ["/venv/lib/site-packages"]


def test_a_relative_pythonpath_means_the_folder_it_names_from_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the resident starts in /: it is given the folders the caller's PYTHONPATH names, and serves that caller only
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", f"src{os.pathsep}")
    relative = resident.stamp()
    assert resident.search_path() == f"{tmp_path / 'src'}{os.pathsep}{tmp_path}"
    monkeypatch.setenv("PYTHONPATH", resident.search_path())
    assert resident.stamp() == relative
    monkeypatch.setenv("PYTHONPATH", f"src{os.pathsep}")
    monkeypatch.chdir(tmp_path.parent)  # the same words name other folders from here
    assert resident.stamp() != relative


def make_shared(tmp_path: Path, mode: int) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    return shared


def test_every_folder_above_the_socket_must_be_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KBENCH_RESIDENT", "1")
    monkeypatch.setenv("KBENCH_RESIDENT_IDLE", "5")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(make_shared(tmp_path, 0o777)))  # anyone may swap kbench/ in it
    assert resident.forward(["--list"]) is None
    assert not (tmp_path / "shared" / "kbench").exists()  # no socket, no resident there
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 'shared'} is writable by others" in err[0]
    (tmp_path / "shared").chmod(0o1777)  # sticky, as /tmp: only its owner renames kbench/
    assert resident.folder().is_dir()


def test_a_runtime_folder_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # root with another user's XDG_RUNTIME_DIR (sudo -E): that user could swap root's kbench/ folder under it
    runtime = make_shared(tmp_path, 0o700)
    if os.geteuid() == 0:
        os.chown(runtime, 54321, 54321)
    else:
        monkeypatch.setattr(fsutil, "me", lambda: os.getuid() + 54321)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with pytest.raises(resident.NotPrivate, match="belongs to uid"):
        resident.folder()


@pytest.mark.skipif(not HAS_PROC_FD, reason="needs /proc/self/fd")
def test_the_checked_socket_folder_is_held_not_walked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    where = resident.folder()
    (tmp_path / "kbench").rename(tmp_path / "checked")
    (tmp_path / "kbench").mkdir(mode=0o700)  # swapped in after the check
    resident.socket_path(where).write_text("")
    assert (tmp_path / "checked" / "resident-all.sock").exists()
    assert not (tmp_path / "kbench" / "resident-all.sock").exists()


def test_a_listener_of_another_user_gets_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a socket answered by someone else (whatever let it there): the call runs in its own process, its environment
    # and command line never sent
    where = tmp_path / "kbench"
    where.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(resident.socket_path(where)))
    listener.listen(1)
    listener.settimeout(10)
    received = bytearray()

    def listen() -> None:
        with contextlib.suppress(OSError), listener, listener.accept()[0] as conn:
            conn.settimeout(3)
            while chunk := conn.recv(65536):
                received.extend(chunk)

    thread = threading.Thread(target=listen)
    thread.start()
    monkeypatch.setenv("KBENCH_RESIDENT", "1")
    monkeypatch.setenv("KBENCH_SECRET", "root's token")
    monkeypatch.setattr(resident, "folder", lambda: where)
    monkeypatch.setattr(fsutil, "me", lambda: os.getuid() + 54321)  # the listener is not "me"
    monkeypatch.setattr(resident, "_start", lambda path: None)
    assert resident.forward(["--list"]) is None
    thread.join()
    assert b"root's token" not in received and b"env" not in received
    assert "answers as uid" in capsys.readouterr().err


def gone(pid: int) -> bool:
    """Whether process ``pid`` ended (a zombie nobody reaped yet counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.slow
def test_one_resident_per_socket(tmp_path: Path, env: dict[str, str]) -> None:
    # calls that found no resident start one each, concurrently with one that already serves: it keeps the socket
    assert kernel(["--list"], env, tmp_path).returncode == 0
    where = started(env)
    pid = int((where / "resident-all.pid").read_text())
    start = "from kbench.cli import resident as r; r._start(r.socket_path(r.folder()))"
    starts = [subprocess.Popen([sys.executable, "-c", start], env=env) for _ in range(3)]
    assert [p.wait(timeout=60) for p in starts] == [0, 0, 0]
    log = where / "resident-all.log"
    deadline = time.monotonic() + 60
    while log.read_text().count("already serves") < 3:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    assert int((where / "resident-all.pid").read_text()) == pid
    assert kernel(["--list"], env, tmp_path).returncode == 0 and len(served(log)) == 1
    stopped = kernel(["--resident-stop"], env, tmp_path)
    assert "the resident kbench stopped" in stopped.stderr
    wait_for(where / "resident-all.sock", present=False)
    deadline = time.monotonic() + 10
    while not gone(pid):  # the one resident is gone: nothing orphaned holds the GPU
        assert time.monotonic() < deadline
        time.sleep(0.1)


@pytest.mark.slow
def test_a_command_that_kills_the_resident_runs_once(tmp_path: Path, env: dict[str, str]) -> None:
    count = tmp_path / "count"
    kp = package(tmp_path / "kp", "boom", f"open({str(count)!r}, 'a').write('ran\\n')\nos._exit(9)")
    assert kernel(["--kernel-path", str(kp), "--list"], env, tmp_path).returncode == 9  # in its own process
    started(env)
    call = kernel(["--kernel-path", str(kp), "--list"], env, tmp_path)  # the resident runs it and dies
    assert count.read_text() == "ran\n" * 2
    assert call.returncode == 5
    assert call.stderr.startswith("kbench: error: the resident kbench died") and len(call.stderr.splitlines()) == 1


@pytest.mark.slow
def test_a_call_that_gave_up_waiting_is_not_also_run_by_the_resident(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the client's go is the one point where a command becomes the resident's: a client that stopped waiting (it runs
    # the command itself) and closes after the resident said it was ready leaves the command unrun there
    ran = tmp_path / "ran"
    kp = package(tmp_path / "kp", "maker", f"open({str(ran)!r}, 'a').write('ran\\n')")
    assert kernel(["--list"], env, tmp_path).returncode == 0
    where = started(env)
    for key in ("XDG_RUNTIME_DIR", "PYTHONPATH"):
        monkeypatch.setenv(key, env.get(key, ""))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(where / "resident-all.sock"))
        resident.send(conn, argv=["--kernel-path", str(kp), "--list"], command=["kbench"], cwd=str(tmp_path),
                      env=env, umask=0o022, stamp=resident.stamp())  # fmt: skip
        conn.settimeout(30)
        assert "stale" not in next(resident.messages(conn))  # ready: the command is not run until the go
    deadline = time.monotonic() + 60
    while "served: --list (exit 0)" not in served(where / "resident-all.log"):  # once the resident is free again
        assert kernel(["--list"], env, tmp_path).returncode == 0 and time.monotonic() < deadline
    assert not ran.exists()
    assert served(where / "resident-all.log") == ["served: --list (exit 0)"]


@pytest.mark.slow
def test_a_served_command_keeps_its_callers_umask(tmp_path: Path, env: dict[str, str]) -> None:
    made = tmp_path / "made"
    kp = package(tmp_path / "kp", "maker", f"open({str(made)!r}, 'w').close()")
    assert kernel(["--list"], env, tmp_path, umask=0o022).returncode == 0  # the resident starts under 022
    where = started(env)
    assert kernel(["--kernel-path", str(kp), "--list"], env, tmp_path, umask=0o077).returncode == 0
    assert len(served(where / "resident-all.log")) == 1
    assert made.stat().st_mode & 0o777 == 0o600


def test_a_resident_that_cannot_be_private_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kbench").mkdir(mode=0o755)
    (tmp_path / "kbench").chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("KBENCH_RESIDENT", "1")
    monkeypatch.setenv("KBENCH_RESIDENT_IDLE", "5")
    assert resident.forward(["--list"]) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 'kbench'}" in err[0] and "mode 0755" in err[0]
    assert "KBENCH_RESIDENT=0" in err[0]
    monkeypatch.setenv("KBENCH_RESIDENT", "0")  # off: silent
    assert resident.forward(["--list"]) is None and capsys.readouterr().err == ""


@pytest.mark.slow
def test_the_files_kbench_writes_in_a_served_command_keep_that_callers_umask(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Each served command's own umask, not the first one's: a run folder's params.json and report.md (written by
    kbench, atomically) under umask 077 are the caller's alone, after a command under 022 was served."""
    args = ["vector_add", "--prof_type=access", "--n=64", "--no-check"]
    assert kernel(["--list"], env, tmp_path, umask=0o022).returncode == 0
    where = started(env)
    first = kernel([*args, "--out", str(tmp_path / "open")], env, tmp_path, umask=0o022)
    assert first.returncode == 0, first.stderr
    second = kernel([*args, "--out", str(tmp_path / "private")], env, tmp_path, umask=0o077)
    assert second.returncode == 0, second.stderr
    assert len(served(where / "resident-all.log")) == 2
    (params,) = (tmp_path / "private").rglob("params.json")
    (report,) = (tmp_path / "private").rglob("report.md")
    assert params.stat().st_mode & 0o777 == 0o600 and report.stat().st_mode & 0o777 == 0o600
    (opened,) = (tmp_path / "open").rglob("report.md")
    assert opened.stat().st_mode & 0o777 == 0o644
