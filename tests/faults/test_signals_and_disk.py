"""Signals at any point and a disk that fills: one line, exit 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP), or 1
(cannot write); no run folder left looking complete or still running; no truncated file under its final name;
earlier profiles untouched."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.faults.helpers import CAPTURE, earlier_run, kbench, one_line, snapshot

SLOW = """
import time
from typing import Any

from kbench_slow_base import *  # noqa: F403

"""


def slow_package(root: Path, where: str) -> Path:
    """A user package (copy of the clone test's plan) that sleeps in ``where``: its import ("import"), its stage
    list ("stages", reached by analyze --plan and check) or its reference ("reference", reached by check)."""
    pkg = root / "slowpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        '"""sleeps (a fault-suite plan)."""\n' + ("import time\ntime.sleep(60)\n" if where == "import" else "")
    )
    source = (DATA / "user_kernels_clone" / "scale" / "v1.py").read_text()
    if where == "stages":
        source = source.replace(
            "    def stages(self) -> list[Stage]:\n",
            "    def stages(self) -> list[Stage]:\n        import time\n\n        time.sleep(60)\n",
        )
    if where == "reference":
        source = source.replace(
            "        return ws.x * 2.0", "        import time\n\n        time.sleep(60)\n        return ws.x * 2.0"
        )
    (pkg / "base.py").write_text(source)
    return root


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as in a terminal: a background child would ignore SIGINT


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "where"),
    [
        (["check", "slowpkg"], "reference"),
        (["analyze", str(CAPTURE), "--plan", "slowpkg"], "stages"),
        (["list"], "import"),
    ],
    ids=["check", "analyze", "list"],
)
@pytest.mark.parametrize(
    ("sig", "code", "fragment"),
    [
        (signal.SIGINT, 130, "interrupted"),
        (signal.SIGTERM, 143, "terminated by SIGTERM"),
        (signal.SIGHUP, 129, "terminated by SIGHUP"),
    ],
    ids=["INT", "TERM", "HUP"],
)
def test_a_signal_anywhere_is_one_line_and_its_exit_code(
    command: list[str], where: str, sig: signal.Signals, code: int, fragment: str, tmp_path: Path
) -> None:
    kernels = slow_package(tmp_path / "kp", where)
    out = tmp_path / "profiles"
    earlier = earlier_run(out)
    before = snapshot(out)
    extra = ["--out", str(out)] if command[0] == "analyze" else []
    p = subprocess.Popen(
        [sys.executable, "-m", "kbench", *command, *extra, "--kernel-path", str(kernels)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "KBENCH_LOCK_CLOCKS": "0"},
        preexec_fn=_default_sigint,
    )
    time.sleep(4)  # imports done, the plan sleeping
    assert p.poll() is None, p.communicate()
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    one_line(err, fragment)
    assert snapshot(out) == before and (earlier / "report.md").is_file()
    statuses = [json.loads(f.read_text()).get("status") for f in out.rglob("params.json")]
    assert "running" not in statuses


def _limit(nbytes: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_leaves_no_truncated_file(tmp_path: Path) -> None:
    out = tmp_path / "profiles"
    earlier = earlier_run(out)
    before = snapshot(out)
    # a 1.3 MB capture does not fit under the limit: its copy into the new run folder fails part-way
    big = DATA / "ncu_h100" / "full_add.ncu-rep"
    done = kbench("analyze", str(big), "--out", str(out), preexec_fn=lambda: _limit(400_000))
    assert done.code == 1, done.stderr
    one_line(done.stderr, "cannot write")
    assert "File too large" in done.stderr
    new = [d for d in {p.parent for p in out.rglob("params.json")} if d != earlier]
    assert len(new) == 1
    assert sorted(p.name for p in new[0].iterdir()) == ["FAILED.txt", "params.json"]  # no partial capture
    assert json.loads((new[0] / "params.json").read_text())["status"] == "failed"
    assert {k: v for k, v in snapshot(out).items() if not k.startswith(str(new[0].relative_to(out)))} == before
    runs = json.loads(kbench("runs", "--out", str(out), "--json").stdout)
    assert {r["status"] for r in runs} == {"ok", "failed"}


@pytest.mark.slow
def test_a_full_disk_while_access_mode_draws_its_pictures_is_one_line_exit_1(tmp_path: Path) -> None:
    """Access mode's pictures are drawn in its child process (no GPU): a write the machine refuses there is the same
    one line and exit 1 as in kbench's own process, never a "kbench bug" (70), and leaves no truncated picture."""
    out = tmp_path / "profiles"
    # the pictures (~44 kB each) pass the limit; the run folder's JSON files and logs stay under it
    done = kbench("profile", "vector_add", "--n=65536", "--prof_type=access", "--out", str(out), timeout=300,
                  preexec_fn=lambda: _limit(30_000))  # fmt: skip
    assert done.code == 1, done.stderr
    one_line(done.stderr, "cannot write")
    assert "File too large" in done.stderr
    (run,) = {p.parent for p in out.rglob("params.json")}
    assert json.loads((run / "params.json").read_text())["status"] == "failed"
    assert not list(run.rglob("*.png")) and not list(run.rglob("*.tmp"))


@pytest.mark.slow
def test_a_picture_blocked_by_a_folder_is_one_line_exit_1(tmp_path: Path) -> None:
    """`kbench check --access-pictures DIR` where a folder already holds a picture's name: one line, exit 1."""
    pictures = tmp_path / "pictures"
    (pictures / "vector_add-base-a.png").mkdir(parents=True)
    done = kbench("check", "vector_add", "base", "--access", "--access-pictures", str(pictures), timeout=300)
    assert done.code == 1, done.stderr
    one_line(done.stderr, f"cannot write {pictures / 'vector_add-base-a.png'}")


def test_a_dead_run_is_not_shown_as_running(tmp_path: Path) -> None:
    out = tmp_path / "profiles"
    run = out / "event" / "matmul" / "m1" / "20260101T000000Z"
    run.mkdir(parents=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    import socket

    params = {"kernel": "matmul", "mode": "event", "status": "running", "pid": gone.pid, "host": socket.gethostname()}
    (run / "params.json").write_text(json.dumps(params))
    alive = out / "event" / "matmul" / "m1" / "20260101T000001Z"
    alive.mkdir()
    (alive / "params.json").write_text(json.dumps({**params, "pid": os.getpid()}))
    rows = json.loads(kbench("runs", "--out", str(out), "--json").stdout)
    assert [r["status"] for r in rows] == ["running", "died"]


@pytest.mark.slow
def test_written_files_get_the_umasks_mode_not_0600(tmp_path: Path) -> None:
    out = tmp_path / "profiles"
    run = earlier_run(out)
    for name in ("params.json", "result.json", "report.json", "report.md"):
        assert (run / name).stat().st_mode & 0o777 == 0o666 & ~_umask(), name


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


CHILD_RUNNER = """
import sys
from pathlib import Path
from kbench.cli.common import run_command
from kbench.capture import tools
import typer

app = typer.Typer()

@app.command()
def main() -> None:
    # a profiler stand-in that starts a grandchild and waits: both must end with kbench
    tools.run(["bash", "-c", "sleep 300 & echo $! > " + sys.argv[1] + "; wait"], timeout_s=600,
              log_path=Path(sys.argv[1] + ".log"))

run_command(typer.main.get_command(app), [], "kbench")
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_while_a_profiler_runs_ends_its_whole_process_group(sig: signal.Signals, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD_RUNNER, str(pidfile)],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.1)
    grandchild = int(pidfile.read_text())
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + sig, err
    one_line(err, "interrupted (Ctrl-C)" if sig == signal.SIGINT else "terminated by SIGTERM")
    time.sleep(0.2)
    assert not _running(grandchild)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed process stays one until whoever adopted it reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"
