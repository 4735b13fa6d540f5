"""The resident kbench on CPU: `python -m kbench.kernel` commands as a user runs them (fresh processes), the first
starting a resident, the next ones served by it with the same output and exit codes; a resident of other code is
replaced, one that died costs one fresh run, and `--resident-stop` ends it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbench.cli import resident, resident_server


def kernel(args: list[str], env: dict[str, str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbench.kernel", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def served(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith("served: ")] if log.exists() else []


def wait_for(path: Path, present: bool = True, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while path.exists() != present:
        assert time.monotonic() < deadline, f"{path} {'never appeared' if present else 'never went'}"
        time.sleep(0.1)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    return {**os.environ, "KBENCH_RESIDENT": "1", "XDG_RUNTIME_DIR": str(runtime), "KBENCH_RESIDENT_IDLE": "60"}


@pytest.mark.slow
def test_cli_calls_take_the_warm_resident_path(env: dict[str, str]) -> None:
    where = Path(env["XDG_RUNTIME_DIR"]) / "kbench"
    sock, log = where / "resident-all.sock", where / "resident-all.log"
    first = kernel(["--list"], env)  # no resident yet: this call runs itself and starts one
    assert first.returncode == 0 and "mla_decode" in first.stdout
    wait_for(sock)
    assert oct(where.stat().st_mode & 0o777) == "0o700"
    try:
        second = kernel(["--list"], env)
        assert (second.returncode, second.stdout) == (0, first.stdout)
        assert served(log) == ["served: --list (exit 0)"]
        # errors keep their line and exit code
        bad = kernel(["nosuchkernel", "--prof_type=event"], env)
        fresh = kernel(["nosuchkernel", "--prof_type=event"], {**env, "KBENCH_RESIDENT": "0"})
        assert (bad.returncode, bad.stderr) == (fresh.returncode, fresh.stderr) and bad.returncode != 0
        assert len(served(log)) == 2
        # a resident that died: the call runs in a fresh process (one retry), and a new resident comes for the next
        pid = int((where / "resident-all.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        after = kernel(["--list"], env)
        assert (after.returncode, after.stdout) == (0, first.stdout)
        wait_for(where / "resident-all.pid")
        assert int((where / "resident-all.pid").read_text()) != pid
    finally:
        stopped = kernel(["--resident-stop"], env)
    assert stopped.returncode == 0 and "stopped" in stopped.stderr
    wait_for(sock, present=False)


def test_a_resident_serves_only_the_code_and_environment_it_was_started_with(monkeypatch: pytest.MonkeyPatch) -> None:
    first = resident.stamp()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert resident.stamp() != first
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert resident.socket_path(Path("/x")).name == "resident-1_2.sock"


def test_no_resident_where_it_is_off_or_its_folder_is_not_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBENCH_RESIDENT", "0")
    assert resident.forward(["--list"]) is None and not resident.wanted()
    monkeypatch.setenv("KBENCH_RESIDENT", "1")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "kbench").mkdir(mode=0o755)
    (shared / "kbench").chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    with pytest.raises(resident.NotPrivate):
        resident.folder()
    assert resident.forward(["--list"]) is None


def test_a_served_command_runs_as_its_client(tmp_path: Path) -> None:
    # folder, umask, environment, command line (what params.json and the GPU lock record), output: the client's, and
    # the resident's own again afterwards
    import socket

    ours, theirs = socket.socketpair()
    mask = os.umask(0o022)
    before = (Path.cwd(), sys.orig_argv, os.environ.get("KBENCH_X"))
    request = {"argv": ["matmul"], "command": ["python", "-m", "kbench.kernel", "matmul"], "cwd": str(tmp_path),
               "env": {**os.environ, "KBENCH_X": "1"}, "umask": 0o077}  # fmt: skip
    try:
        with resident_server._as_client(request, ours):
            assert Path.cwd() == tmp_path and os.environ["KBENCH_X"] == "1"
            assert sys.orig_argv == ["python", "-m", "kbench.kernel", "matmul"]
            (tmp_path / "made").touch()
            print("hello")
        assert (Path.cwd(), sys.orig_argv, os.environ.get("KBENCH_X")) == before and os.umask(0o022) == 0o022
    finally:
        os.umask(mask)
    assert (tmp_path / "made").stat().st_mode & 0o777 == 0o600
    ours.close()
    with theirs:
        assert b'"out": "hello"' in theirs.recv(4096)


def test_resident_stop_answers_where_no_resident_is_wanted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m kbench.kernel --resident-stop` (README, --help) on a machine without a driver or with
    KBENCH_RESIDENT=0 (as here): it says none runs and exits 0, not 'unknown option'."""
    from kbench.cli import resident

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("KBENCH_RESIDENT", "0")
    assert resident.forward(["--resident-stop"]) == 0
    assert capsys.readouterr().err.strip() == "kbench: no resident kbench is running"
