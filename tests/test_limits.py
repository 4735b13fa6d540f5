"""What a capture may cost (issue 41): an .ncu-rep's layout and size checked before ncu_report spends memory on
it, and a size limit on every kind of capture (KBENCH_MAX_CAPTURE_MB)."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import pytest

from kbench.analysis import ncu
from kbench.errors import ConfigError, UsageError
from tests.conftest import DATA
from tests.faults.helpers import kbench, one_line

REAL = DATA / "ncu_h100" / "ann_mm.ncu-rep"  # a real H100 capture: 3 kernels, 12 blocks
REPORTS = sorted(DATA.rglob("*.ncu-rep"))
PAD = 4 << 20  # bytes of zeros: the review's files held 300 MB


def _varint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
    return out + bytes([n])


def _block(sources: int, results: int, entries: list[bytes]) -> bytes:
    """One block as Nsight Compute lays it out: its size, its header (fields 1, 2 and 5), its payload."""
    payload = b"".join(struct.pack("<I", len(e)) + e for e in entries)
    header = b"\x08" + _varint(sources) + b"\x10" + _varint(results) + b"\x28" + _varint(len(payload))
    return struct.pack("<I", len(header)) + header + payload


def _hostile() -> dict[str, bytes]:
    real = REAL.read_bytes()
    return {
        "real-then-zeros": real + bytes(PAD),  # ncu_report read it as the real report (exit 0, 30x its size)
        "header-then-zeros": real[:10] + bytes(PAD),  # the review's shape: a valid file header, then zeros
        "magic-then-zeros": b"NVR\x00" + bytes(PAD),
        "a-block-of-zeros": real + _block(0, 1, [bytes(PAD)]),
        "a-block-past-the-end": real + _block(0, 1, [b"\x08\x01"])[:-1],
        "a-block-with-an-extra-entry": real + _block(0, 1, [b"\x08\x01", b"\x08\x02"]),
        "cut-inside-a-block": real[: len(real) // 3],
    }


@pytest.mark.parametrize("name", list(_hostile()))
def test_a_report_whose_layout_does_not_add_up_is_refused_before_ncu_report_reads_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ncu_report

    def never(path: str) -> None:
        raise AssertionError(f"ncu_report.load_report({path}) ran on a malformed report")

    monkeypatch.setattr(ncu_report, "load_report", never)
    path = tmp_path / f"{name}.ncu-rep"
    path.write_bytes(_hostile()[name])
    with pytest.raises(ConfigError, match="truncated or corrupt Nsight Compute report"):
        ncu.kernels(path)


def test_a_zero_padded_report_is_one_line_exit_4_and_no_run_folder(tmp_path: Path) -> None:
    path = tmp_path / "padded.ncu-rep"
    path.write_bytes(REAL.read_bytes() + bytes(PAD))
    done = kbench("analyze", str(path), "--out", str(tmp_path / "out"))
    assert done.code == 4, done.stderr
    one_line(done.stderr, f"a block header of size 0 (zeros where a record belongs) at byte {REAL.stat().st_size:,}")
    assert not (tmp_path / "out").exists()


def test_a_report_of_more_records_than_the_walk_reads_is_refused(tmp_path: Path) -> None:
    from kbench.analysis import ncu_layout

    path = tmp_path / "tiny-blocks.ncu-rep"
    path.write_bytes(REAL.read_bytes() + _block(0, 0, []) * (ncu_layout.MAX_RECORDS + 1))
    with pytest.raises(ConfigError, match="more than 262,144 blocks and entries"):
        ncu_layout.check(path)


@pytest.mark.parametrize("report", REPORTS, ids=[str(p.relative_to(DATA)) for p in REPORTS])
def test_every_real_report_is_laid_out_to_its_last_byte(report: Path) -> None:
    from kbench.analysis import ncu_layout

    ncu_layout.check(report)
    assert ncu_layout.walk(report.read_bytes()) >= 3  # at least a session block, a source and a result


def test_a_report_over_the_size_limit_is_refused_naming_the_variable_that_raises_it(tmp_path: Path) -> None:
    from kbench import inputs

    big = DATA / "ncu_h100" / "full_mm.ncu-rep"  # 1.4 MB
    limit = big.stat().st_size / inputs.MB / 2
    done = kbench("analyze", str(big), "--out", str(tmp_path / "out"), env={inputs.LIMIT_ENV: str(limit)})
    assert done.code == 2, done.stderr
    one_line(done.stderr, f"over the {limit:,.0f} MB kbench reads of an Nsight Compute report; set {inputs.LIMIT_ENV}")
    assert not (tmp_path / "out").exists()
    raised = kbench("analyze", str(big), "--out", str(tmp_path / "out"), env={inputs.LIMIT_ENV: str(limit * 4)})
    assert raised.code == 0, raised.stderr


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf"])
def test_a_limit_that_is_no_size_is_a_usage_error(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench import inputs

    monkeypatch.setenv(inputs.LIMIT_ENV, value)
    with pytest.raises(UsageError, match=f"{inputs.LIMIT_ENV}={value} is not a size in MB"):
        inputs.check_size(REAL)


CAPTURES = [
    DATA / "ncu_h100" / "full_mm.ncu-rep",
    DATA / "kbench_h100" / "nsys_fork_join.sqlite",
    DATA / "kbench_h100" / "torch_fork_join.json",
    DATA / "proton_h100" / "mla_v3.hatchet",
]


def _readers() -> dict[str, object]:
    from kbench.analysis import proton, timeline

    return {".ncu-rep": ncu.kernels, ".sqlite": timeline.load, ".json": timeline.load, ".hatchet": proton.load}


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.suffix for p in CAPTURES])
def test_every_reader_of_a_capture_refuses_one_over_its_limit_before_reading_it(
    capture: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbench import inputs

    read = _readers()[capture.suffix]
    assert callable(read)
    monkeypatch.setenv(inputs.LIMIT_ENV, str(capture.stat().st_size / inputs.MB / 2))
    with pytest.raises(inputs.TooLarge, match=f"{capture.name} is .* MB, over the .* MB kbench reads of"):
        read(capture)


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.suffix for p in CAPTURES])
def test_analyze_refuses_a_capture_over_its_limit_before_any_backend_opens_it(
    capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbench import inputs, pipeline
    from kbench.modes import registry

    def never(path: Path, mode: str | None) -> None:
        raise AssertionError(f"a backend was chosen for {path}, over its limit")

    monkeypatch.setattr(registry, "for_capture", never)
    monkeypatch.setenv(inputs.LIMIT_ENV, str(capture.stat().st_size / inputs.MB / 2))
    with pytest.raises(inputs.TooLarge):
        pipeline.analyze(capture, None, tmp_path / "out", None)
    assert not (tmp_path / "out").exists()


def test_the_default_limits_are_far_above_every_real_capture() -> None:
    from kbench import inputs

    real = [p for p in DATA.rglob("*") if p.suffix in inputs.LIMIT_MB and p.is_file()]
    assert {p.suffix for p in real} == set(inputs.LIMIT_MB)
    for p in real:
        assert p.stat().st_size * 100 < inputs.limit_mb(p.suffix) * inputs.MB, p


# --- a killed kbench leaves no profiler behind ---------------------------------------------------------------------

SLEEPER = "import os, sys, time; open(sys.argv[1], 'a').write(f'{os.getpid()}\\n'); time.sleep(300)"
# a profiler stand-in: its own pid, a child in its process group (the plan's child under ncu), and a process in a
# session of its own whose command line carries a marker (the profiled program under nsys)
TOOL = (
    "import subprocess, sys\n"
    f"sleeper = {SLEEPER!r}\n"
    "subprocess.Popen([sys.executable, '-c', sleeper, sys.argv[1]])\n"
    "subprocess.Popen([sys.executable, '-c', sleeper, sys.argv[1], 'stray-marker'], start_new_session=True)\n"
    "exec(sleeper)\n"
)
KBENCH = (
    "import sys, threading\n"
    "from pathlib import Path\n"
    "from kbench.capture import tools\n"
    f"tool = {TOOL!r}\n"
    "def profile():\n"
    "    tools.run([sys.executable, '-c', tool, sys.argv[1]], timeout_s=600, log_path=Path(sys.argv[1] + '.log'),\n"
    "              strays=('stray-marker',))\n"
    "if sys.argv[2] == 'thread':  # as the MCP server profiles: in a worker thread\n"
    "    worker = threading.Thread(target=profile)\n"
    "    worker.start()\n"
    "    worker.join()\n"
    "else:\n"
    "    profile()\n"
)


def _alive(pid: int) -> bool:
    """Running, and not a zombie left for a reaper (a container's init may not reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_sigkilled_kbench_leaves_no_profiler_and_no_child_running(where: str, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    pids = tmp_path / "pids"
    kbench_proc = subprocess.Popen([sys.executable, "-c", KBENCH, str(pids), where])
    started: list[int] = []
    try:
        for _ in range(300):
            started = [int(p) for p in pids.read_text().split()] if pids.exists() else []
            if len(started) == 3:
                break
            time.sleep(0.05)
        assert len(started) == 3, "the profiler stand-in did not start"
        kbench_proc.send_signal(signal.SIGKILL)
        kbench_proc.wait()
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in started if _alive(p)], "still running after kbench was killed"
    finally:
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_finished_tool_leaves_no_reaper_behind(tmp_path: Path) -> None:
    import os
    import sys

    from kbench.capture import tools

    done = tools.run([sys.executable, "-c", "print('ok')"], timeout_s=60, log_path=tmp_path / "log")
    assert done.returncode == 0 and "ok" in done.log
    reapers = [p for p in tools.matching_processes([str(tools.REAPER)]) if _alive(p)]
    mine = [p for p in reapers if Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(os.getpid())]
    assert mine == []
