"""The only place kbench starts subprocesses: argv lists (never a shell), a timeout, and the whole process
group killed on timeout or Ctrl-C so no profiler or child is left behind, or by a reaper should kbench be killed."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kbench.capture import reaper
from kbench.capture.reaper import matching_processes as matching_processes  # the tests' name for it
from kbench.errors import KbenchError
from kbench.errors import ToolMissing as ToolMissing  # raised here; its home is kbench.errors


class ToolTimeout(KbenchError):
    exit_code = 8


@dataclass(frozen=True)
class Finished:
    returncode: int
    log: str  # stdout and stderr together


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def lookup(name: str, env_var: str, more: Callable[[], list[Path]] = list) -> Path | None:
    """``$env_var`` (which must then be right), PATH, $CUDA_HOME/bin, then ``more()`` in order."""
    if env := os.environ.get(env_var):
        if _executable(Path(env)):
            return Path(env)
        raise ToolMissing(f"{env_var}={env} is not an executable file; point it at {name} or unset it")
    if found := shutil.which(name):
        return Path(found)
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / name
    return next((c for c in [cuda, *more()] if _executable(c)), None)


def find_ncu() -> Path:
    """KBENCH_NCU, then PATH, then $CUDA_HOME/bin; ToolMissing with what to do otherwise."""
    if found := lookup("ncu", "KBENCH_NCU"):
        return found
    raise ToolMissing(
        "Nsight Compute (ncu) not found on KBENCH_NCU, PATH or $CUDA_HOME/bin; install it, or use "
        "--prof_type=event for timings without hardware counters"
    )


# Where Nsight tools install outside a CUDA toolkit's bin/ (a toolkit's bin/ncu is a script that runs the newest
# <toolkit>/nsight-compute-*/ncu or /opt/nvidia/nsight-compute/*/ncu)
OPT_NVIDIA = Path("/opt/nvidia")


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.name))


def ncu_python(ncu: Path) -> Path | None:
    """The folder of the ncu_report module that ships with Nsight Compute ``ncu`` (<install>/extras/python); for a
    toolkit's bin/ncu script (which runs the newest <toolkit>/nsight-compute-*/ncu, else /opt/nvidia's) the newest of
    those installs'; None where there is none."""
    found = (
        d / "extras" / "python" for d in _ncu_installs(ncu) if (d / "extras" / "python" / "ncu_report.py").is_file()
    )
    return next(found, None)


def _ncu_installs(ncu: Path | None) -> list[Path]:
    """Where Nsight Compute may be installed, in the order a toolkit's bin/ncu script looks: beside ``ncu`` (resolved),
    <toolkit>/nsight-compute-* newest first, then /opt/nvidia/nsight-compute/* newest first."""
    near: list[Path] = []
    if ncu is not None:
        real = ncu.resolve()
        near = [real.parent, *sorted(real.parent.parent.glob("nsight-compute*"), key=_version_key, reverse=True)]
    return near + sorted((OPT_NVIDIA / "nsight-compute").glob("*"), key=_version_key, reverse=True)


def _nsys_candidates() -> list[Path]:
    """Nsight Systems installs, newest first, then the nsys inside each Nsight Compute install."""
    systems = sorted((OPT_NVIDIA / "nsight-systems").glob("*"), key=_version_key, reverse=True)
    try:
        ncu: Path | None = find_ncu()
    except ToolMissing:
        ncu = None
    roots = _ncu_installs(ncu)
    return [d / "bin" / "nsys" for d in systems] + [r / "host" / "target-linux-x64" / "nsys" for r in roots]


def find_nsys() -> Path:
    """KBENCH_NSYS, then PATH, then $CUDA_HOME/bin, then an Nsight Systems install under /opt/nvidia, then the
    copy inside an Nsight Compute install (``<ncu-root>/host/target-linux-x64/nsys``); ToolMissing otherwise."""
    if found := lookup("nsys", "KBENCH_NSYS", _nsys_candidates):
        return found
    raise ToolMissing(
        "Nsight Systems (nsys) not found on KBENCH_NSYS, PATH, $CUDA_HOME/bin, /opt/nvidia/nsight-systems or inside "
        "an Nsight Compute install (<ncu-root>/host/target-linux-x64/nsys); install it or set KBENCH_NSYS"
    )


def wait(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """``proc``'s exit code, waiting at most ``timeout_s`` (subprocess.TimeoutExpired after). On Linux the wait ends
    the moment the process does (a pidfd, polled once): Popen.wait's own timeout sleeps in steps growing to 50 ms,
    so a command's end was seen up to 50 ms late (every time bench_turnaround took on the H100 fell on a 50 ms
    grid). Elsewhere, or where pidfds are refused, Popen.wait does it."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3, or not permitted
        return proc.wait(timeout=timeout_s)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(math.ceil(max(0.0, timeout_s) * 1000)):
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
    finally:
        os.close(fd)
    return proc.wait()


def run(
    argv: list[str],
    *,
    timeout_s: float,
    log_path: Path,
    env: dict[str, str] | None = None,
    strays: tuple[str, ...] = (),
) -> Finished:
    """Run ``argv`` with output to ``log_path``; kill its process group on timeout or interrupt, and with it every
    process whose command line holds one of ``strays`` ("{pid}" stands for the started process's id): the processes
    a tool starts in sessions of their own (Nsight Systems runs the profiled program and its agent so), which
    outlive their process group's end. A reaper does the same should this process die first (``reaped``)."""
    with _log(log_path) as log, reaped() as watch:
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)  # noqa: S603
        except OSError as e:
            raise ToolMissing(f"cannot start {argv[0]}: {e.strerror}") from None
        watch(proc.pid, strays)
        try:
            code = wait(proc, timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc, strays)
            raise ToolTimeout(
                f"{Path(argv[0]).name} ran past {timeout_s:.0f} s and was killed with its children; see {log_path}"
            ) from None
        except BaseException:
            _kill_group(proc, strays)
            raise
    return Finished(code, log_path.read_text(errors="replace"))


def run_all(jobs: list[tuple[list[str], dict[str, str], Path]], *, timeout_s: float) -> list[Finished]:
    """Run several commands at once (argv, environment, log file each); wait for all. On timeout or interrupt every
    process group still running is killed (ToolTimeout names the first log), as the reaper does should this process
    die first."""
    procs: list[subprocess.Popen[bytes]] = []
    logs = [_log(path) for _, _, path in jobs]
    try:
        with reaped() as watch:
            for (argv, env, _), log in zip(jobs, logs, strict=True):
                started = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)  # noqa: S603
                procs.append(started)
                watch(started.pid, ())
            deadline = time.monotonic() + timeout_s
            codes = []
            for proc in procs:
                try:
                    codes.append(wait(proc, max(0.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    raise ToolTimeout(
                        f"ran past {timeout_s:.0f} s and was killed with its children; see {jobs[0][2]}"
                    ) from None
    except OSError as e:
        raise ToolMissing(f"cannot start {jobs[len(procs)][0][0]}: {e.strerror}") from None
    finally:
        for proc in procs:
            if proc.poll() is None:
                _kill_group(proc)
        for log in logs:
            log.close()
    return [Finished(code, path.read_text(errors="replace")) for code, (_, _, path) in zip(codes, jobs, strict=True)]


def _log(path: Path) -> IO[str]:
    """A tool's log file, opened for writing as a plain file of its own (fsutil.open_plain): a link planted at its
    name (a resumed sweep's folder may be anyone's) is refused, not written through."""
    from kbench.fsutil import open_plain

    return os.fdopen(open_plain(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w")


REAPER = Path(reaper.__file__)


@contextmanager
def reaped() -> Iterator[Callable[[int, tuple[str, ...]], None]]:
    """Within the block, ``watch(pid, strays)`` hands a started tool to a reaper (capture/reaper.py: a process in a
    session of its own, reading a pipe from this one) that kills its process group and strays should this process
    die before the block ends (SIGKILL, the OOM killer: no handler of this process runs then). PR_SET_PDEATHSIG
    would need preexec_fn, unsafe while threads run (the MCP server profiles in a worker thread), would fire when
    the thread that started the tool ends rather than the process, and would reach the tool but not the plan's
    child under it. At the block's end the reaper is killed: the tools are done, or ended here."""
    try:
        proc = subprocess.Popen(  # noqa: S603
            [sys.executable, "-I", "-S", str(REAPER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:  # no interpreter to start: the tools are ended here when this process can, as before
        yield lambda pid, strays: None
        return
    assert proc.stdin is not None
    pipe = proc.stdin

    def watch(pid: int, strays: tuple[str, ...]) -> None:
        with contextlib.suppress(OSError):  # the reaper died: nothing more it can do
            pipe.write(json.dumps([pid, _markers(pid, strays)]).encode() + b"\n")
            pipe.flush()

    try:
        yield watch
    finally:
        proc.kill()  # before the pipe closes, which would tell it this process is gone
        proc.wait()
        with contextlib.suppress(OSError):
            pipe.close()


def detach(argv: list[str], log_path: Path, *, cwd: Path, env: dict[str, str]) -> bool:
    """Start ``argv`` in ``cwd`` with ``env``, in a session of its own that outlives this process (the resident kbench:
    it ends itself when idle), output appended to ``log_path``; False where it cannot start."""
    try:
        with log_path.open("ab") as log:
            subprocess.Popen(  # noqa: S603
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
                cwd=cwd, env=env,
            )  # fmt: skip
    except OSError:
        return False
    return True


def python_module(module: str, *args: str, safe_flag: bool = sys.version_info >= (3, 11)) -> list[str]:
    """The argv of `python -m module args` importing nothing from the working folder (a checked-out repo's
    typer.py or kbench/ would run first otherwise): -P on Python 3.11 and later, else the folder dropped from sys.path
    before the module is looked up."""
    if safe_flag:
        return [sys.executable, "-P", "-m", module, *args]
    # sys (built in) first: runpy itself is looked up on the path once the working folder has left it (Python 3.10
    # does not freeze it, so a runpy.py planted there would run)
    run = f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    start = f"import sys; del sys.path[0]; import runpy; {run}"
    return [sys.executable, "-c", start, *args]


def output(argv: list[str], *, timeout_s: float = 30.0) -> Finished:
    """Run a short command (a query) and capture its output; ToolMissing when it cannot start or hangs."""
    try:
        # bytes that are no UTF-8 (a path of odd bytes a tool quotes) replaced, never a crash
        done = subprocess.run(argv, capture_output=True, encoding="utf-8", errors="replace", timeout=timeout_s)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolMissing(f"cannot run {Path(argv[0]).name}: {e}") from None
    return Finished(done.returncode, done.stdout + done.stderr)


def nvidia_smi() -> Path | None:
    """nvidia-smi (NVIDIA_SMI overrides PATH), or None."""
    found = os.environ.get("NVIDIA_SMI") or shutil.which("nvidia-smi")
    return Path(found) if found and _executable(Path(found)) else None


def _markers(pid: int, strays: tuple[str, ...]) -> list[str]:
    """The strays' markers of the tool started as ``pid``: "{pid}" stands for it."""
    return [m.replace("{pid}", str(pid)) for m in strays]


def _kill_group(proc: subprocess.Popen[bytes], strays: tuple[str, ...] = ()) -> None:
    reaper.end(proc.pid, _markers(proc.pid, strays))
    proc.wait()


def version(tool: Path, timeout_s: float = 60) -> str:
    """The tool's version string (e.g. '2025.3.1.0'), read from `<tool> --version`."""
    try:
        out = subprocess.run([str(tool), "--version"], capture_output=True, text=True, timeout=timeout_s)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolMissing(f"cannot run {tool} --version: {e}") from None
    m = re.search(r"(\d{4}\.\d+(\.\d+)*)", out.stdout + out.stderr)
    return m.group(1) if m else (out.stdout.strip().splitlines() or ["unknown"])[-1]
