"""Clock control and one profiling per GPU, on a CPU: the lock/reset scripts against a stand-in nvidia-smi (dry
run, argument checks, the root check, what they record and undo), the reset-always context manager with the
driver replaced at its boundary (exceptions, SIGINT and SIGTERM mid-measurement in a child process), a lock left
by a killed run, the clock samples' verdict, and two processes contending for one GPU."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbench import signals
from kbench.analysis.clocks import Reading, summarize
from kbench.capture import clocks, gpulock
from kbench.capture.clocks import SmiControl
from kbench.errors import Terminated
from tests.clock_fakes import FakeClocks, install_fake_smi

ROOT = Path(__file__).parents[1]
LOCK, RESET = ROOT / "scripts" / "lock-gpu-clock.sh", ROOT / "scripts" / "reset-gpu-clock.sh"
IS_ROOT = os.geteuid() == 0


@pytest.fixture
def smi(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # a folder an ordinary user can read too (the scripts' root check runs them as one)
    folder = Path(tempfile.mkdtemp(prefix="kbench-smi-"))
    folder.chmod(0o755)
    path, log = install_fake_smi(folder)
    log.chmod(0o666)
    monkeypatch.setenv("NVIDIA_SMI", str(path))
    monkeypatch.setenv("FAKE_SMI_LOG", str(log))
    yield log
    shutil.rmtree(folder)


def script(path: Path, *args: str, as_user: bool = False) -> subprocess.CompletedProcess[str]:
    argv = ["bash", str(path), *args]
    if as_user and IS_ROOT:  # the same script as an ordinary user
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def clock_commands(log: Path) -> list[str]:
    return [
        line
        for line in log.read_text().splitlines()
        if line.split()[-2:][0] in ("-lgc", "-lmc") or line.split()[-1] in ("-rgc", "-rmc")
    ]


def test_dry_run_prints_the_commands_and_changes_nothing(smi: Path) -> None:
    p = script(LOCK, "--dry-run", as_user=True)
    assert p.returncode == 0, p.stderr
    fake = os.environ["NVIDIA_SMI"]
    assert [line for line in p.stdout.splitlines() if line.startswith("+ ")] == [
        f"+ {fake} -i 0 -lgc 1590,1590",
        f"+ {fake} -i 0 -lmc 2619,2619",
        f"+ {fake} -i 1 -lgc 1755,1755",
        f"+ {fake} -i 1 -lmc 2619,2619",
    ]
    assert "GPU 1: would lock SM at 1755 MHz, memory 2619 (dry run: nothing changed)" in p.stdout
    assert clock_commands(smi) == [] and not list(Path(os.environ["KBENCH_STATE_DIR"]).glob("*.clocks"))
    p = script(LOCK, "--gpu", "1", "--sm=1200", "--no-mem", "--dry-run")
    assert [line for line in p.stdout.splitlines() if line.startswith("+ ")] == [f"+ {fake} -i 1 -lgc 1200,1200"]
    p = script(RESET, "--dry-run", as_user=True)
    assert p.returncode == 0 and "GPU 0: no lock recorded" in p.stdout and "GPU 1: no lock recorded" in p.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "x"], "--gpu takes a GPU index (0, 1, ...) or all, not 'x'"),
        (["--gpu=-1"], "--gpu takes a GPU index"),
        (["--gpu", "7"], "no GPU 7 here (GPUs: 0 1)"),
        (["--sm", "12a"], "--sm takes a clock in MHz (digits only), not '12a'"),
        (["--sm", "99999"], "GPU 0: --sm 99999 is outside its supported 345-1980 MHz"),
        (["--sm", "100"], "outside its supported 345-1980 MHz"),
        (["--mem", "1e3"], "--mem takes a clock in MHz (digits only)"),
        (["--mem", "5000"], "--mem 5000 is outside its supported 2619-2619 MHz"),
        (["--sm"], "--sm needs a value"),
        (["--force"], "unknown argument '--force'"),
    ],
)
def test_lock_arguments_are_checked_before_anything_runs(smi: Path, args: list[str], message: str) -> None:
    p = script(LOCK, *args)  # not even the root check comes first: bad input is refused for anyone
    assert p.returncode == 2 and p.stderr.startswith("lock-gpu-clock.sh: ") and message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert clock_commands(smi) == []


def test_reset_arguments_are_checked(smi: Path) -> None:
    for args, message in ((["--gpu", "one"], "--gpu takes a GPU index"), (["-x"], "unknown argument '-x'")):
        p = script(RESET, *args)
        assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_without_root_the_scripts_stop_with_one_line(smi: Path) -> None:
    if not IS_ROOT and os.geteuid() == 0:
        pytest.skip("unreachable")
    for path, verb in ((LOCK, "locking"), (RESET, "resetting")):
        p = script(path, as_user=True) if IS_ROOT else script(path)
        assert p.returncode == 1
        assert p.stderr.strip() == (
            f"{path.name}: {verb} GPU clocks needs root: run it with sudo, or add --dry-run to see the commands"
        )
    assert clock_commands(smi) == []


@pytest.mark.skipif(not IS_ROOT, reason="runs the scripts as root against the stand-in nvidia-smi")
def test_lock_records_what_it_locked_and_reset_undoes_exactly_that(smi: Path, monkeypatch) -> None:
    state = Path(os.environ["KBENCH_STATE_DIR"])
    p = script(LOCK, "--gpu", "1")
    assert p.returncode == 0, p.stderr
    assert clock_commands(smi) == ["-i 1 -lgc 1755,1755", "-i 1 -lmc 2619,2619"]
    record = dict(line.split("=", 1) for line in (state / "gpu1.clocks").read_text().splitlines())
    assert record["owner"] == "script" and record["sm_mhz"] == "1755" and record["mem_mhz"] == "2619"
    again = script(LOCK, "--gpu", "1")  # idempotent
    assert "GPU 1: already locked at SM 1755 MHz, memory 2619" in again.stdout and len(clock_commands(smi)) == 2
    rec = clocks.read_record(1)
    assert rec is not None and rec.owner == "script" and rec.sm_mhz == 1755 and rec.mem_mhz == 2619
    p = script(RESET)
    assert p.returncode == 0 and "GPU 0: no lock recorded" in p.stdout and "GPU 1: reset SM (1755 MHz)" in p.stdout
    assert clock_commands(smi)[2:] == ["-i 1 -rgc", "-i 1 -rmc"] and not (state / "gpu1.clocks").exists()
    assert "nothing to reset" in script(RESET, "--gpu", "1").stdout and len(clock_commands(smi)) == 4
    monkeypatch.setenv("FAKE_SMI_NO_LMC", "1")
    p = script(LOCK, "--gpu", "0", "--sm", "1410")
    assert "GPU 0: this GPU does not lock its memory clock; the SM clock is locked alone" in p.stdout
    assert clocks.read_record(0) is not None and clocks.read_record(0).mem_mhz is None  # type: ignore[union-attr]
    script(RESET, "--gpu", "0")
    assert clock_commands(smi)[-1] == "-i 0 -rgc"  # no -rmc: memory was never locked


def test_held_locks_to_base_and_always_resets() -> None:
    fake = FakeClocks()
    with clocks.held(fake, lock=True) as state:
        assert (
            state.locked
            and state.by_kbench
            and state.state
            == "locked by kbench at SM 1590 MHz (the driver's default applications clock), memory 2619 MHz"
        )
        rec = clocks.read_record(0)
        assert rec is not None and rec.owner == "kbench" and rec.pid == os.getpid()
    assert fake.calls == ["lock 1590 2619", "reset mem=True"] and clocks.read_record(0) is None
    with pytest.raises(RuntimeError, match="kernel crashed"), clocks.held(fake, lock=True):
        raise RuntimeError("kernel crashed")
    assert fake.calls[-1] == "reset mem=True" and clocks.read_record(0) is None
    with clocks.held(fake, lock=False) as state:
        assert not state.locked and "--no-lock-clocks" in state.state
    with clocks.held(FakeClocks(permitted=False), lock=True) as state:
        assert not state.locked and state.state.startswith(
            "not locked (NVML nvmlDeviceSetGpuLockedClocks: no permission"
        )
    with clocks.held(None, lock=True) as state:
        assert state.state == "not locked (neither NVML nor nvidia-smi can reach this GPU)"


def test_what_is_recorded_is_what_was_locked() -> None:
    class NoMemoryLock(FakeClocks):
        def lock(self, sm_mhz: int, mem_mhz: int | None) -> bool:
            super().lock(sm_mhz, mem_mhz)
            return False  # this GPU does not lock its memory clock

    class ResetRefused(FakeClocks):
        def reset(self, mem: bool) -> None:
            raise clocks.ClockPermission("NVML nvmlDeviceResetGpuLockedClocks: no permission")

    fake = NoMemoryLock()
    with clocks.held(fake, lock=True) as state:
        rec = clocks.read_record(0)
        assert rec is not None and rec.mem_mhz is None and state.state.endswith("default applications clock)")
    assert fake.calls == ["lock 1590 2619", "reset mem=False"]
    with clocks.held(ResetRefused(), lock=True):
        pass
    rec = clocks.read_record(0)  # kept, so that the next run or reset-gpu-clock.sh can undo the lock
    assert rec is not None and rec.owner == "kbench" and rec.pid == os.getpid()


def test_the_clock_to_lock_to_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBENCH_LOCK_SM_MHZ", "1410")
    fake = FakeClocks()
    with clocks.held(fake, lock=True) as state:
        assert state.state.startswith("locked by kbench at SM 1410 MHz (KBENCH_LOCK_SM_MHZ)")
    monkeypatch.setenv("KBENCH_LOCK_SM_MHZ", "fast")
    with clocks.held(fake, lock=True) as state:
        assert state.state == "not locked (KBENCH_LOCK_SM_MHZ=fast is not a clock in MHz)"
    assert fake.calls == ["lock 1410 2619", "reset mem=True"]


def test_a_lock_by_the_script_is_left_alone() -> None:
    clocks.write_record(0, clocks.LockRecord("script", 1, 1410, None, "2026-11-22T10:00:00Z"))
    fake = FakeClocks()
    with clocks.held(fake, lock=True) as state:
        assert state.locked and not state.by_kbench
        assert state.state == "locked by scripts/lock-gpu-clock.sh at SM 1410 MHz since 2026-11-22T10:00:00Z"
    assert fake.calls == [] and clocks.read_record(0) is not None


CHILD = """
import signal, sys, time
# a shell's background job (`cmd &` without job control) starts with SIGINT ignored, and so would this child
signal.signal(signal.SIGINT, signal.default_int_handler)
from kbench import signals
from kbench.capture import clocks
from tests.clock_fakes import FakeClocks

class Logged(FakeClocks):
    def reset(self, mem):
        super().reset(mem)
        print("reset", flush=True)

fake = Logged()
with signals.terminate_raises(), clocks.held(fake, lock=True) as state:
    print("measuring", state.locked, flush=True)
    time.sleep(60)
"""


def _child(extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, **(extra_env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "measuring True"
    return proc


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "error"), [(signal.SIGTERM, "Terminated: terminated by SIGTERM"), (signal.SIGINT, "KeyboardInterrupt")]
)
def test_a_signal_mid_measurement_still_resets_the_clocks(sig: signal.Signals, error: str) -> None:
    proc = _child()
    assert clocks.read_record(0) is not None  # the child's lock is recorded
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()  # never left running into the next test
    assert out.strip() == "reset" and error in err and proc.returncode != 0
    assert clocks.read_record(0) is None


def test_a_killed_runs_lock_is_reset_by_the_next_run() -> None:
    proc = _child()
    proc.kill()  # SIGKILL: nothing of the child's can run
    proc.communicate(timeout=30)
    stale = clocks.read_record(0)
    assert stale is not None and stale.pid == proc.pid and not stale.alive()
    fake = FakeClocks()
    with clocks.held(fake, lock=True) as state:
        (note,) = state.notes
        assert note.startswith(f"clocks left locked at 1590 MHz by kbench pid {proc.pid}") and note.endswith(
            "reset them"
        )
    assert fake.calls == ["reset mem=True", "lock 1590 2619", "reset mem=True"]
    # without the permission to reset, the next run says what to do
    clocks.write_record(0, clocks.LockRecord("kbench", proc.pid, 1590, None, "2026-11-22T10:00:00Z"))
    with clocks.held(FakeClocks(permitted=False), lock=False) as state:
        assert state.notes[0].endswith("could not reset them (no permission): run scripts/reset-gpu-clock.sh --gpu 0")


def test_terminate_raises_only_inside_the_block() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated, match="terminated by SIGTERM"), signals.terminate_raises():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) is before


def test_samples_say_whether_the_measurement_can_be_trusted() -> None:
    steady = summarize(
        "locked by kbench at SM 1590 MHz (the driver's default applications clock)", [Reading(1590, 2619, 0)] * 50
    )
    assert (
        not steady.unstable
        and steady.line()
        == "locked by kbench at SM 1590 MHz (the driver's default applications clock); "
        "SM 1590-1590 MHz over 50 busy samples"
    )
    power = [Reading(1980, 2619, 0)] * 4 + [Reading(1590 + 10 * i, 2619, 0x4) for i in range(16)]
    s = summarize("not locked (--no-lock-clocks; kbench left the GPU's clocks alone)", power)
    assert s.unstable and s.reasons_pct == {"power cap": 80.0} and s.sm_min_mhz == 1590 and s.sm_max_mhz == 1980
    assert s.line() == (
        "not locked (--no-lock-clocks; kbench left the GPU's clocks alone); SM 1590-1980 MHz over 20 busy samples; "
        "power cap active in 80% of samples; measurement unstable: SM clock moved 23.1% (1590-1980 MHz, limit 5%), "
        "power cap active while measuring"
    )
    # an idle GPU's clock drops: those samples are counted but left out of the range
    idle = summarize("x", [Reading(345, 2619, 0x1), Reading(1755, 2619, 0), Reading(1740, None, None)])
    assert not idle.unstable and idle.reasons_pct == {"GPU idle": 50.0}  # of the samples whose reasons were read
    assert (
        idle.line()
        == "x; SM 1740-1755 MHz over 2 busy samples (1 idle samples left out); GPU idle active in 50% of samples"
    )
    assert summarize("x", []).line() == "x; SM clock not sampled while busy (no NVML or nvidia-smi reading)"
    assert (
        summarize("x", [Reading(345, 2619, 0x1)]).line().startswith("x; SM clock not sampled while busy (the GPU idled")
    )


def test_the_monitor_samples_until_stopped() -> None:
    fake = FakeClocks([Reading(1980, 2619, 0), Reading(1965, 2619, 0x4)])
    with clocks.Monitor(fake, interval_s=0.005) as m:
        time.sleep(0.1)
    n = len(m.samples)
    time.sleep(0.05)
    assert n >= 5 and len(m.samples) == n and {r.sm_mhz for r in m.samples} == {1980, 1965}


def test_nvidia_smi_control_reads_and_locks(smi: Path, monkeypatch) -> None:
    ctl = SmiControl(Path(os.environ["NVIDIA_SMI"]), 1)
    assert ctl.read() == Reading(1755, 2619, 0x4) and ctl.base_sm_mhz() == 1755 and ctl.max_mem_mhz() == 2619
    assert ctl.lock(1755, 2619) is True
    ctl.reset(mem=True)
    assert clock_commands(smi) == ["-i 1 -lgc 1755,1755", "-i 1 -lmc 2619,2619", "-i 1 -rgc", "-i 1 -rmc"]
    monkeypatch.setenv("FAKE_SMI_DENY", "1")
    with pytest.raises(clocks.ClockPermission, match="insufficient permissions"):
        ctl.lock(1755, None)


HOLDER = """
import time
from kbench.capture import gpulock
with gpulock.exclusive(0, progress=print):
    print("held", flush=True)
    time.sleep(float(__import__("sys").argv[1]))
"""


@pytest.mark.slow
def test_two_processes_contend_for_one_gpu() -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "3"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(gpulock.GpuBusy) as e, gpulock.exclusive(0, wait=False):
        pass
    assert f"GPU 0 is busy: kbench pid {holder.pid} (`" in str(e.value) and "rerun when it is done" in str(e.value)
    said: list[str] = []
    started = time.monotonic()
    with gpulock.exclusive(0, progress=said.append):
        waited = time.monotonic() - started  # the holder keeps the GPU for 3 s
        info = json.loads(gpulock.lock_path(0).read_text())
        assert info["pid"] == os.getpid()
    assert waited > 1 and len(said) == 1 and said[0].startswith(f"GPU 0 is busy: kbench pid {holder.pid}")
    assert "waiting for it (Ctrl-C to give up, --no-wait to not queue)" in said[0]
    holder.communicate(timeout=10)
    assert holder.returncode == 0


def test_a_dead_holder_frees_the_gpu() -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "60"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.communicate(timeout=10)
    with gpulock.exclusive(0, wait=False):  # the OS released the dead process's lock
        pass


def test_a_wake_up_sample_is_not_a_throttle() -> None:
    # between ncu's replay passes the GPU idles; a sample taken as it wakes reads 345 MHz before the driver sets
    # its idle reason: counted as idle, not as an unstable clock (seen on the H100 in annotation mode)
    woke = summarize("x", [Reading(1980, 2619, 0)] * 10 + [Reading(345, 2619, 0)])
    assert not woke.unstable and woke.idle_samples == 1 and woke.sm_min_mhz == 1980
    throttled = summarize("x", [Reading(1980, 2619, 0)] * 10 + [Reading(345, 2619, 0x8)])
    assert throttled.unstable and throttled.sm_min_mhz == 345  # a slowdown the driver reports stays in


def test_a_stage_timed_at_a_sagging_clock_is_marked() -> None:
    from kbench.analysis.clocks import sagged, window

    # 1980 MHz at the start; the GEMM's window (t 10-20 s) at 1485-1500 MHz under the power cap; an idle sample
    samples = [
        Reading(1980, 2619, 0, t=1.0),
        Reading(1485, 2619, 0x4, t=11.0),
        Reading(1500, 2619, 0x4, t=12.0),
        Reading(345, 2619, 0x1, t=13.0),
        Reading(1980, 2619, 0, t=25.0),
    ]
    gemm = window(samples, 10.0, 20.0)
    assert gemm == {"sm_mhz": 1492.5, "samples": 2, "slowdown": ["power cap"]}
    note = sagged("mm", gemm, 1980.0)
    assert note is not None and note.startswith(
        "mm was timed at a median SM clock of 1492 MHz, 25% below the 1980 MHz the measurement started at "
        "(power cap active)"
    )
    assert sagged("add", window(samples, 20.0, 30.0), 1980.0) is None  # at the start clock
    assert window(samples, 13.0, 14.0) is None  # only an idle sample
    assert sagged("x", {"sm_mhz": 1900, "samples": 3, "slowdown": []}, 1980.0) is None  # 4% below: within 5%


# -- the scripts share the state folder with kbench and trust it, and the records in it, as kbench does -----------
STRANGER = 54321  # a uid no account on a test machine has


def _stranger_record(state: Path, owner: str) -> Path:
    record = state / "gpu1.clocks"
    record.write_text(f"owner={owner}\npid=1\nsm_mhz=1755\nmem_mhz=2619\nsince=2026-11-22T10:00:00Z\n")
    record.chmod(0o644)
    os.chown(record, STRANGER, STRANGER)
    return record


@pytest.mark.skipif(not IS_ROOT, reason="runs the scripts as root; makes another user's record with os.chown")
def test_the_scripts_ignore_a_record_another_user_wrote(smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = Path(os.environ["KBENCH_STATE_DIR"])
    state.chmod(0o1777)  # as /tmp/kbench-state is: anyone may add a file
    record = _stranger_record(state, "script")
    p = script(RESET, "--gpu", "1")
    assert p.returncode == 0 and f"GPU 1: ignoring {record}: it belongs to uid {STRANGER}" in p.stdout
    assert clock_commands(smi) == [] and record.exists()  # old: -rgc, -rmc on clocks no one here locked
    p = script(LOCK, "--gpu", "1")  # old: "already locked ...; nothing to do", from the forged record
    assert p.returncode == 0 and "ignoring" in p.stdout and "locked SM at 1755 MHz" in p.stdout, p.stdout
    assert clock_commands(smi) == ["-i 1 -lgc 1755,1755", "-i 1 -lmc 2619,2619"]
    assert record.stat().st_uid == 0 and record.stat().st_mode & 0o777 == 0o644
    assert [f.name for f in state.iterdir()] == ["gpu1.clocks"]  # its temp file renamed, none left behind


@pytest.mark.skipif(not IS_ROOT, reason="runs the scripts as root against the stand-in nvidia-smi")
@pytest.mark.parametrize("plant", ["symlink", "other user's folder", "writable without the sticky bit"])
def test_the_lock_script_refuses_a_state_folder_it_cannot_trust(
    smi: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plant: str
) -> None:
    target, state = tmp_path / "target", tmp_path / "state"
    target.mkdir(mode=0o755)
    if plant == "symlink":
        state.symlink_to(target)  # old: chmod 1777 on the folder it points at, then records written there
    else:
        state.mkdir()
        state.chmod(0o777 if plant.startswith("writable") else 0o1777)
        if plant == "other user's folder":
            os.chown(state, STRANGER, STRANGER)
    monkeypatch.setenv("KBENCH_STATE_DIR", str(state))
    for path in (LOCK, RESET):
        p = script(path, "--gpu", "1")
        assert p.returncode == 1 and p.stderr.startswith(f"{path.name}: the state folder {state} "), p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    assert clock_commands(smi) == [] and target.stat().st_mode & 0o7777 == 0o755 and not list(target.iterdir())
