"""GPU clocks: read them, lock them for a measurement and always reset them, and sample them while measuring.

One small interface (``ClockControl``) over NVML (nvidia-ml-py) with nvidia-smi as the fallback; tests replace it
at that boundary. ``held`` locks the SM clock (to the GPU's base / default applications clock) and, where the
GPU supports it, the memory clock, records the lock in a state file, and resets exactly that on normal exit, on
an exception, on Ctrl-C and on SIGTERM/SIGHUP; a state file left by a kbench run that was killed is found by the
next run, which resets those clocks (or says it could not). Clocks locked by scripts/lock-gpu-clock.sh are left
as they are and reported. ``Monitor`` samples the SM clock and the clock-event reasons in a thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from kbench.analysis.clocks import ClockSummary, Reading, summarize
from kbench.capture import gpulock
from kbench.errors import ConfigError, KbenchError, UsageError
from kbench.fsutil import doubt, open_plain, pid_alive, state_dir, write_text_atomic
from kbench.signals import terminate_raises

log = logging.getLogger(__name__)
SAMPLE_INTERVAL_S = 0.02


class ClockError(KbenchError):
    """The driver did not change the clocks as asked (kbench then runs unlocked and says so)."""


class ClockPermission(ClockError):
    """The driver refused to change clocks (not root, or the GPU does not allow it)."""


class ClockControl(Protocol):
    """What kbench needs from the driver for one GPU; ``index`` is its NVML / nvidia-smi index."""

    index: int

    def read(self) -> Reading: ...

    def base_sm_mhz(self) -> int | None: ...

    def max_sm_mhz(self) -> int | None: ...

    def max_mem_mhz(self) -> int | None: ...

    def lock(self, sm_mhz: int, mem_mhz: int | None) -> bool:
        """Lock the SM clock (and the memory clock when given); True when the memory clock was locked too."""
        ...

    def reset(self, mem: bool) -> None: ...


class NvmlControl:
    def __init__(self, nv: Any, handle: Any) -> None:
        self.nv, self.handle = nv, handle
        self.index = int(nv.nvmlDeviceGetIndex(handle))

    def _get(self, fn: str, *args: Any) -> int | None:
        try:
            return int(getattr(self.nv, fn)(self.handle, *args))
        except self.nv.NVMLError:
            return None

    def read(self) -> Reading:
        reasons = getattr(self.nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        name = "nvmlDeviceGetCurrentClocksEventReasons" if reasons else "nvmlDeviceGetCurrentClocksThrottleReasons"
        return Reading(
            self._get("nvmlDeviceGetClockInfo", self.nv.NVML_CLOCK_SM),
            self._get("nvmlDeviceGetClockInfo", self.nv.NVML_CLOCK_MEM),
            self._get(name),
        )

    def base_sm_mhz(self) -> int | None:
        return self._get("nvmlDeviceGetDefaultApplicationsClock", self.nv.NVML_CLOCK_GRAPHICS)

    def max_sm_mhz(self) -> int | None:
        return self._get("nvmlDeviceGetMaxClockInfo", self.nv.NVML_CLOCK_SM)

    def max_mem_mhz(self) -> int | None:
        return self._get("nvmlDeviceGetMaxClockInfo", self.nv.NVML_CLOCK_MEM)

    def _call(self, fn: str, *args: Any) -> None:
        try:
            getattr(self.nv, fn)(self.handle, *args)
        except self.nv.NVMLError as e:
            if getattr(e, "value", None) == self.nv.NVML_ERROR_NO_PERMISSION:
                raise ClockPermission(f"NVML {fn}: no permission") from None
            raise ClockError(f"NVML {fn}: {e}") from None

    def lock(self, sm_mhz: int, mem_mhz: int | None) -> bool:
        self._call("nvmlDeviceSetGpuLockedClocks", sm_mhz, sm_mhz)
        if mem_mhz is None:
            return False
        try:
            self._call("nvmlDeviceSetMemoryLockedClocks", mem_mhz, mem_mhz)
        except ClockError:  # not supported on this GPU: the SM lock stands alone
            return False
        return True

    def reset(self, mem: bool) -> None:
        self._call("nvmlDeviceResetGpuLockedClocks")
        if mem:
            self._call("nvmlDeviceResetMemoryLockedClocks")


class SmiControl:
    """The same through nvidia-smi (queries and -lgc / -lmc / -rgc / -rmc), where NVML cannot be loaded."""

    def __init__(self, smi: Path, index: int) -> None:
        self.smi, self.index = smi, index

    def _query(self, fields: str) -> list[str]:
        from kbench.capture import tools

        done = tools.output(
            [str(self.smi), "-i", str(self.index), f"--query-gpu={fields}", "--format=csv,noheader,nounits"]
        )
        return [v.strip() for v in done.log.strip().splitlines()[0].split(",")] if done.returncode == 0 else []

    @staticmethod
    def _int(v: str, base: int = 10) -> int | None:
        try:
            return int(v, base)
        except ValueError:
            return None

    def read(self) -> Reading:
        v = self._query("clocks.sm,clocks.mem,clocks_event_reasons.active")
        if len(v) != 3:
            return Reading(None)
        return Reading(self._int(v[0]), self._int(v[1]), self._int(v[2].removeprefix("0x"), 16))

    def base_sm_mhz(self) -> int | None:
        v = self._query("clocks.default_applications.graphics")
        return self._int(v[0]) if v else None

    def max_sm_mhz(self) -> int | None:
        v = self._query("clocks.max.sm")
        return self._int(v[0]) if v else None

    def max_mem_mhz(self) -> int | None:
        v = self._query("clocks.max.memory")
        return self._int(v[0]) if v else None

    def _run(self, *args: str) -> bool:
        from kbench.capture import tools

        done = tools.output([str(self.smi), "-i", str(self.index), *args])
        if done.returncode != 0 and ("permission" in done.log.lower() or "root" in done.log.lower()):
            raise ClockPermission(f"nvidia-smi {' '.join(args)}: {done.log.strip().splitlines()[-1]}")
        return done.returncode == 0

    def lock(self, sm_mhz: int, mem_mhz: int | None) -> bool:
        if not self._run("-lgc", f"{sm_mhz},{sm_mhz}"):
            raise ClockError(f"nvidia-smi -lgc {sm_mhz},{sm_mhz} failed")
        return mem_mhz is not None and self._run("-lmc", f"{mem_mhz},{mem_mhz}")

    def reset(self, mem: bool) -> None:
        self._run("-rgc")
        if mem:
            self._run("-rmc")


@contextlib.contextmanager
def control() -> Iterator[ClockControl | None]:
    """The clocks of torch's current GPU: through NVML, else nvidia-smi, else None (nothing to read or lock)."""
    from kbench.capture import nvml, tools

    with nvml.current_gpu() as gpu:
        ctl: ClockControl | None = None
        if gpu is not None:
            try:
                ctl = NvmlControl(*gpu)
            except Exception as e:
                log.info("NVML clock control unavailable (%s); trying nvidia-smi", e)
        if ctl is None and (smi := tools.nvidia_smi()) is not None:
            ctl = SmiControl(smi, _cuda_index())
        yield ctl


def _cuda_index() -> int:
    try:
        import torch

        return int(torch.cuda.current_device())
    except Exception:
        return 0


# -- the state file the lock scripts and kbench share: <state_dir>/gpu<N>.clocks, key=value lines ------------
@dataclass(frozen=True)
class LockRecord:
    owner: str  # "kbench" or "script"
    pid: int
    sm_mhz: int
    mem_mhz: int | None
    since: str
    command: str = ""

    def alive(self) -> bool:
        return pid_alive(self.pid)


def record_path(index: int) -> Path:
    return state_dir() / f"gpu{index}.clocks"


def _record_text(path: Path) -> str | None:
    """The record's text when root or this user wrote it and no one else can have changed it since; else None,
    said in a log line (another user's forged record must neither pass for held clocks nor get clocks reset)."""
    try:
        fd = open_plain(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except (OSError, ConfigError) as e:
        log.warning("ignoring %s: %s", path, e)
        return None
    with os.fdopen(fd, "rb") as f:
        if (why := doubt(os.fstat(fd))) is not None:
            log.warning("ignoring %s: it %s, so not written by kbench or the lock script run by you or root", path, why)
            return None
        return f.read(1 << 16).decode(errors="replace")


def read_record(index: int) -> LockRecord | None:
    if (text := _record_text(record_path(index))) is None:
        return None
    try:
        pairs = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        return LockRecord(
            owner=pairs["owner"],
            pid=int(pairs.get("pid", "0")),
            sm_mhz=int(pairs["sm_mhz"]),
            mem_mhz=int(pairs["mem_mhz"]) if pairs.get("mem_mhz", "none") not in ("", "none") else None,
            since=pairs.get("since", "?"),
            command=pairs.get("command", ""),
        )
    except (OSError, KeyError, ValueError):
        return None


def write_record(index: int, record: LockRecord) -> None:
    lines = [f"{k}={'none' if v is None else v}" for k, v in vars(record).items()]
    write_text_atomic(record_path(index), "\n".join(lines) + "\n", mode=0o644)  # others' kbench reads root's


def recover_stale(ctl: ClockControl) -> str | None:
    """A lock recorded by a kbench run that is gone: reset it (or say why not). None when there is none."""
    rec = read_record(ctl.index)
    if rec is None or rec.owner != "kbench" or rec.alive():
        return None
    what = f"clocks left locked at {rec.sm_mhz} MHz by kbench pid {rec.pid} (since {rec.since}), which is gone"
    try:
        ctl.reset(mem=rec.mem_mhz is not None)
    except ClockError:
        return f"{what}; could not reset them (no permission): run scripts/reset-gpu-clock.sh --gpu {ctl.index}"
    record_path(ctl.index).unlink(missing_ok=True)
    return f"{what}: reset them"


@dataclass
class ClockState:
    locked: bool
    by_kbench: bool
    state: str  # one line for the report
    notes: list[str] = field(default_factory=list)


def chosen_sm_mhz(ctl: ClockControl) -> tuple[int | None, str]:
    """The SM clock to lock to and where it came from: KBENCH_LOCK_SM_MHZ, else the driver's default applications
    clock (the base clock it reports; on an H100 SXM that is its 1980 MHz maximum, which the power cap pulls down
    under sustained load, so a lower KBENCH_LOCK_SM_MHZ holds better)."""
    if (env := os.environ.get("KBENCH_LOCK_SM_MHZ")) is not None:
        if not env.strip().isdigit() or int(env) <= 0:
            return None, f"KBENCH_LOCK_SM_MHZ={env} is not a clock in MHz"
        top = ctl.max_sm_mhz()
        if top is not None and int(env) > top:
            return None, f"KBENCH_LOCK_SM_MHZ={env} is above this GPU's highest SM clock, {top} MHz"
        return int(env), "KBENCH_LOCK_SM_MHZ"
    base = ctl.base_sm_mhz()
    if base is None:
        return None, "the driver reports no default applications clock to lock to; set KBENCH_LOCK_SM_MHZ"
    return base, "the driver's default applications clock"


@contextlib.contextmanager
def held(ctl: ClockControl | None, lock: bool) -> Iterator[ClockState]:
    """Lock the clocks for the block when ``lock`` and permitted; always reset what was locked."""
    if ctl is None:
        yield ClockState(False, False, "not locked (neither NVML nor nvidia-smi can reach this GPU)")
        return
    notes = [n for n in [recover_stale(ctl)] if n]
    rec = read_record(ctl.index)
    if rec is not None and (rec.alive() or rec.owner == "script"):
        who = "scripts/lock-gpu-clock.sh" if rec.owner == "script" else f"kbench pid {rec.pid}"
        mem = f", memory {rec.mem_mhz} MHz" if rec.mem_mhz else ""
        yield ClockState(True, False, f"locked by {who} at SM {rec.sm_mhz} MHz{mem} since {rec.since}", notes)
        return
    if not lock:
        yield ClockState(False, False, "not locked (--no-lock-clocks; kbench left the GPU's clocks alone)", notes)
        return
    base, source = chosen_sm_mhz(ctl)
    if base is None:
        yield ClockState(False, False, f"not locked ({source})", notes)
        return
    mem_target = ctl.max_mem_mhz()
    since = datetime.now(timezone.utc).isoformat(timespec="seconds")

    def record(mem: int | None) -> None:
        write_record(ctl.index, LockRecord("kbench", os.getpid(), base, mem, since, shlex.join(sys.orig_argv)))

    try:
        record(mem_target)  # written first: even a kill right after the lock leaves what the next run needs to reset
    except OSError as e:  # another user's record there (a sticky folder: not ours to replace), a full disk
        why = f"cannot record a lock in {record_path(ctl.index)}: {e.strerror or e}"
        yield ClockState(False, False, f"not locked ({why}; remove that file or set KBENCH_STATE_DIR)", notes)
        return
    refused: ClockError | None = None
    try:
        mem_locked = ctl.lock(base, mem_target)
    except ClockError as e:
        record_path(ctl.index).unlink(missing_ok=True)
        refused, mem_locked = e, False
    if refused is not None:
        hint = (
            "run as root, lock with scripts/lock-gpu-clock.sh" if isinstance(refused, ClockPermission) else "check it"
        )
        yield ClockState(False, False, f"not locked ({refused}; {hint}, or pass --no-lock-clocks)", notes)
        return
    mem_mhz = mem_target if mem_locked else None
    if mem_mhz != mem_target:
        record(mem_mhz)
    state = f"locked by kbench at SM {base} MHz ({source})" + (f", memory {mem_mhz} MHz" if mem_mhz else "")
    try:
        yield ClockState(True, True, state, notes)
    finally:
        try:
            ctl.reset(mem=mem_mhz is not None)
            record_path(ctl.index).unlink(missing_ok=True)
        except ClockError as e:  # the record stays, so the next run or reset-gpu-clock.sh can undo the lock
            log.warning("could not reset the GPU clocks (%s); run scripts/reset-gpu-clock.sh --gpu %d", e, ctl.index)


class Monitor:
    """Samples the SM clock and clock-event reasons every ``interval_s`` in a thread, between start and stop."""

    def __init__(self, ctl: ClockControl | None, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.ctl, self.interval_s = ctl, interval_s
        self.samples: list[Reading] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kbench-clock-monitor", daemon=True)

    def _sample(self) -> None:
        if self.ctl is not None:
            with contextlib.suppress(Exception):  # a failed read is a missing sample, never a failed run
                self.samples.append(replace(self.ctl.read(), t=time.monotonic()))

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()  # one last sample, so a short measurement has at least two


@dataclass
class Measuring:
    """What a mode gets from ``measuring``: how the clocks are held, and ``sampled()`` for the timed window."""

    clocks: ClockState
    ctl: ClockControl | None
    summary: ClockSummary | None = None
    samples: list[Reading] = field(default_factory=list)  # the last sampled window's readings, time-stamped

    @contextlib.contextmanager
    def sampled(self) -> Iterator[None]:
        """Sample the clocks through the block; ``summary`` says what they did."""
        with Monitor(self.ctl) as monitor:
            yield
        self.samples = monitor.samples
        self.summary = summarize(self.clocks.state, monitor.samples)

    def line(self) -> str:
        return self.summary.line() if self.summary else self.clocks.state


@contextlib.contextmanager
def measuring(lock: bool, wait: bool, progress: Callable[[str], None]) -> Iterator[Measuring]:
    """Everything around a measurement: SIGTERM/SIGHUP raise, this GPU's lock is taken (waiting or not), and the
    clocks are locked when asked and permitted, and always reset."""
    with terminate_raises(), control() as ctl:
        index = ctl.index if ctl is not None else _cuda_index()
        with gpulock.exclusive(index, wait=wait, progress=progress), held(ctl, lock) as state:
            for note in state.notes:
                progress(note)
            yield Measuring(state, ctl)


@contextlib.contextmanager
def unmeasured(why: str) -> Iterator[Measuring]:
    """Around a run that uses no GPU (the access mode): SIGTERM/SIGHUP raise; no GPU lock, no clocks; the report's
    Clocks line says ``why``."""
    with terminate_raises():
        yield Measuring(ClockState(locked=False, by_kbench=False, state=why), None)


LOCK_ON, LOCK_OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def lock_by_default() -> bool:
    """KBENCH_LOCK_CLOCKS=0/false/no/off turns clock locking off unless --lock-clocks asks for it (1/true/yes/on or
    unset: on); any other value is refused rather than read as either."""
    value = os.environ.get("KBENCH_LOCK_CLOCKS", "1").strip().lower()
    if value not in LOCK_ON + LOCK_OFF:
        raise UsageError(
            f"KBENCH_LOCK_CLOCKS={os.environ['KBENCH_LOCK_CLOCKS']} is neither on ({'/'.join(LOCK_ON)}) "
            f"nor off ({'/'.join(LOCK_OFF)})"
        )
    return value in LOCK_ON
