"""Driving ncu: the exact argv, finding the tool, and subprocess handling (timeouts kill the process group)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbench.analysis.ncu import ANNOTATION_METRICS, kernels
from kbench.capture import tools
from kbench.capture.ncu_argv import ncu_argv
from kbench.modes.counters import conformance, group
from kbench.plan.discovery import load_version, with_version
from tests.conftest import DATA

CHILD = ["/usr/bin/python3", "-m", "kbench.capture.child", "/r/child-spec.json"]


def test_annotation_argv_is_exact() -> None:
    argv = ncu_argv(Path("/opt/ncu"), False, ["partial", "combine"], Path("/r/profile"), CHILD, lines=False)
    assert argv == [
        "/opt/ncu",
        "--config-file",
        "off",
        "--clock-control",
        "none",
        "--cache-control",
        "all",
        "--nvtx",
        "--nvtx-include",
        "kbench.partial/",
        "--nvtx-include",
        "kbench.combine/",
        "--metrics",
        ",".join(ANNOTATION_METRICS),
        "--export",
        "/r/profile",
        "--force-overwrite",
        *CHILD,
    ]
    assert len(ANNOTATION_METRICS) == len(set(ANNOTATION_METRICS))


def test_annotation_argv_with_time_by_source_line_is_exact() -> None:
    # the default: the short list plus the two metrics of ncu's SourceCounters section the per-line model reads
    # (instructions executed per SASS instruction, the warp-state samples), with the source imported
    argv = ncu_argv(Path("/opt/ncu"), False, ["mm"], Path("/r/profile"), CHILD)
    assert argv == [
        "/opt/ncu",
        "--config-file",
        "off",
        "--clock-control",
        "none",
        "--cache-control",
        "all",
        "--nvtx",
        "--nvtx-include",
        "kbench.mm/",
        "--import-source",
        "yes",
        "--metrics",
        ",".join(ANNOTATION_METRICS) + ",inst_executed,group:smsp__pcsamp_warp_stall_reasons",
        "--export",
        "/r/profile",
        "--force-overwrite",
        *CHILD,
    ]


def test_ncu_argv_uses_the_full_set_with_source_and_the_flop_counts() -> None:
    argv = ncu_argv(Path("ncu"), True, ["mm"], Path("p"), CHILD, clock_control="base")
    i = argv.index("--set")
    assert argv[i : i + 4] == ["--set", "full", "--import-source", "yes"]
    assert "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum" in argv[argv.index("--metrics") + 1]
    assert argv[argv.index("--clock-control") + 1] == "base" and argv[-len(CHILD) :] == CHILD


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_find_ncu_order_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _script(
        tmp_path / "ncu", "print('NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1)')"
    )
    monkeypatch.setenv("KBENCH_NCU", str(fake))
    assert tools.find_ncu() == fake and tools.version(fake) == "2025.3.1.0"
    monkeypatch.setenv("KBENCH_NCU", str(tmp_path / "missing"))
    with pytest.raises(tools.ToolMissing, match="is not an executable file"):
        tools.find_ncu()
    monkeypatch.delenv("KBENCH_NCU")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nocuda"))
    with pytest.raises(tools.ToolMissing, match="use --prof_type=event"):
        tools.find_ncu()
    monkeypatch.setenv("PATH", str(tmp_path))
    assert tools.find_ncu() == fake


def test_run_captures_output_and_exit_code(tmp_path: Path) -> None:
    done = tools.run(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
        timeout_s=60,
        log_path=tmp_path / "log",
    )
    assert done.returncode == 3 and "out" in done.log and "err" in done.log


def _running(pid: int) -> bool:
    """Whether the process runs: not gone, and not a zombie waiting for a reaper (a container's init may not
    reap)."""
    stat_file = Path(f"/proc/{pid}/stat")
    return stat_file.exists() and stat_file.read_text().split(")")[-1].split()[0] != "Z"


@pytest.mark.slow
def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    code = (
        f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        f" open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    started = time.monotonic()
    with pytest.raises(tools.ToolTimeout, match="ran past 2 s and was killed"):
        tools.run([sys.executable, "-c", code], timeout_s=2, log_path=tmp_path / "log")
    assert time.monotonic() - started < 30
    grandchild = int(pidfile.read_text())
    time.sleep(0.2)
    assert not _running(grandchild)


@pytest.mark.slow
def test_an_interrupt_ends_what_the_tool_started_in_sessions_of_its_own(tmp_path: Path) -> None:
    """As Nsight Systems does: the profiled program and an agent in new sessions, out of the process group's reach;
    the ones whose command line carries a marker (the child's spec, the agent's session named after the tool's pid)
    are ended too, and an unrelated one in its own session is left alone."""
    pids = tmp_path / "pids"
    sleeper = "import time; time.sleep(60)"
    code = (
        "import os, subprocess, sys, time\n"
        "def start(*extra):\n"
        f"    return subprocess.Popen([sys.executable, '-c', {sleeper!r}, *extra], start_new_session=True).pid\n"
        f"ids = [start('marker-spec.json'), start('--session-name', f'profile-{{os.getpid()}}'), start('bystander')]\n"
        f"open({str(pids)!r}, 'w').write(' '.join(map(str, ids)))\n"
        "time.sleep(60)\n"
    )
    with pytest.raises(tools.ToolTimeout):
        tools.run(
            [sys.executable, "-c", code],
            timeout_s=3,
            log_path=tmp_path / "log",
            strays=("marker-spec.json", "--session-name profile-{pid}"),
        )
    child, agent, bystander = (int(x) for x in pids.read_text().split())
    time.sleep(0.3)
    try:
        assert not _running(child) and not _running(agent)
        assert _running(bystander)
    finally:
        os.kill(bystander, signal.SIGKILL)


def test_matching_processes_reads_command_lines(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    for pid, cmd in [(11, b"python\0-m\0kbench.capture.child\0/r/child-spec.json\0"), (12, b"bash\0")]:
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(cmd)
    (proc / "13").mkdir()  # gone meanwhile: no cmdline to read
    assert tools.matching_processes(["/r/child-spec.json"], proc) == [11]
    assert tools.matching_processes([], proc) == []


def test_the_reaper_matches_only_its_own_users_processes_and_whole_markers(tmp_path: Path) -> None:
    """Run as root, a reaper of a killed kbench must not end another user's nsys whose session number begins with
    this one's (profile-123 in profile-1234), nor another user's process naming the same relative spec path."""
    proc = tmp_path / "proc"
    cmds = {
        21: b"nsys-agent\0--session-name\0profile-123\0",
        22: b"nsys-agent\0--session-name\0profile-1234\0",  # another kbench's session
        23: b"python\0-m\0kbench.capture.child\0out/p/child-spec.json\0",
    }
    for pid, cmd in cmds.items():
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(cmd)
    markers = ["--session-name profile-123", "out/p/child-spec.json"]
    assert tools.matching_processes(markers, proc) == [21, 23]
    if os.geteuid() == 0:  # another user's process, for real
        os.chown(proc / "23", 54321, 54321)
        assert tools.matching_processes(markers, proc) == [21]


def test_a_missing_program_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(tools.ToolMissing, match="cannot start /nonexistent/ncu"):
        tools.run(["/nonexistent/ncu"], timeout_s=5, log_path=tmp_path / "log")


def test_conformance_compares_declared_and_observed_kernels() -> None:
    plan = load_version("matmul").from_values({})
    grouped = group(kernels(DATA / "ncu_h100" / "ann_mm.ncu-rep"), plan)
    (row,) = conformance(plan, grouped, {"mm": {"grid": [1024]}})
    assert row["observed"] == "mm_kernel" and row["launches"] == "3" and row["verdict"] == "as declared"
    (row,) = conformance(plan, grouped, {"mm": {"grid": [512]}})
    assert row["verdict"] == "differs from the plan" and row["observed_grid"] == "1024"
    torch_plan = with_version(plan, "torch_mm")
    (row,) = conformance(torch_plan, group(kernels(DATA / "ncu_h100" / "ann_mm.ncu-rep"), torch_plan), {})
    assert row["verdict"] == "library stage: kernels not declared"


@pytest.mark.parametrize("pidfd", [True, False])
def test_wait_returns_the_exit_code_or_times_out(monkeypatch: pytest.MonkeyPatch, pidfd: bool) -> None:
    if not pidfd:  # another OS, or pidfds refused: Popen.wait's own timeout
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    ends = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert tools.wait(ends, 30) == 3
    sleeps = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            tools.wait(sleeps, 0.2)
        assert sleeps.poll() is None  # a timeout leaves the process to the caller
    finally:
        sleeps.kill()
        sleeps.wait()


def test_the_per_line_switch_is_read_per_run_not_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    # a resident kbench imported this module under another command's environment: the switch must follow this one's
    # (on the H100 a resident run with KBENCH_ANNOTATION_LINES=0 still collected the source counters)
    def argv() -> list[str]:
        return ncu_argv(Path("/opt/ncu"), False, ["s"], Path("/r/profile"), CHILD)

    monkeypatch.setenv("KBENCH_ANNOTATION_LINES", "0")
    assert argv() == ncu_argv(Path("/opt/ncu"), False, ["s"], Path("/r/profile"), CHILD, lines=False)
    monkeypatch.setenv("KBENCH_ANNOTATION_LINES", "1")
    assert argv() == ncu_argv(Path("/opt/ncu"), False, ["s"], Path("/r/profile"), CHILD, lines=True) != argv_off()


def argv_off() -> list[str]:
    return ncu_argv(Path("/opt/ncu"), False, ["s"], Path("/r/profile"), CHILD, lines=False)
