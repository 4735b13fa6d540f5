"""What a capture may cost (issue 41): an .ncu-rep's layout and size checked before ncu_report spends memory on
it, and a size limit on every kind of capture (KBENCH_MAX_CAPTURE_MB)."""

from __future__ import annotations

import contextlib
import json
import re
import struct
from collections.abc import Mapping
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from kbench import inputs

    read = _readers()[capture.suffix]
    assert callable(read)
    copy = Path(shutil.copy(capture, tmp_path))  # a report read before stays loaded, under its path
    monkeypatch.setenv(inputs.LIMIT_ENV, str(capture.stat().st_size / inputs.MB / 2))
    with pytest.raises(inputs.TooLarge, match=f"{capture.name} is .* MB, over the .* MB kbench reads of"):
        read(copy)


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


def _padded(path: Path, data: Mapping[str, object], mb: float) -> Path:
    """``data`` as JSON followed by spaces (still valid JSON) up to ``mb`` MB."""
    from kbench import inputs

    text = json.dumps(data)
    path.write_text(text + " " * (int(mb * inputs.MB) - len(text)))
    return path


def test_a_run_folders_json_over_its_limit_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """params.json, result.json, predicted.json and the tiling records kbench reads back from a run folder are held
    to the JSON limit too (a 300 MB params.json took 770 MB of memory to read): over it, unread, as an unreadable
    one."""
    from kbench import inputs
    from kbench.fsutil import json_object
    from kbench.report.models import read_result

    path = _padded(tmp_path / "params.json", {"kernel": "matmul"}, 2)
    (tmp_path / "result.json").write_bytes(path.read_bytes())
    monkeypatch.setenv(inputs.LIMIT_ENV, "3")
    assert json_object(path) == {"kernel": "matmul"}
    monkeypatch.setenv(inputs.LIMIT_ENV, "1")
    assert json_object(path) is None and read_result(tmp_path) is None


@pytest.mark.slow
def test_a_params_json_over_its_limit_beside_a_capture_is_not_read(tmp_path: Path) -> None:
    """`kbench analyze` then analyses the capture without the plan that params.json names, and `kbench runs` lists
    the folder as unreadable, one row, the others still listed."""
    import shutil

    from kbench import inputs

    run = tmp_path / "run"
    run.mkdir()
    capture = Path(shutil.copy(DATA / "kbench_h100" / "annotation_matmul_base.ncu-rep", run))
    made = {"kernel": "matmul", "version": "base", "mode": "annotation", "status": "ok",
            "params": {"m": 4096, "n": 4096, "k": 4096, "dtype": "bfloat16"}}  # fmt: skip
    _padded(run / "params.json", made, 2)
    out = tmp_path / "out"
    done = kbench("analyze", str(capture), "--out", str(out), env={inputs.LIMIT_ENV: "1.5"})
    assert done.code == 0, done.stderr
    (report,) = out.rglob("report.md")
    assert report.read_text().startswith("# Profile: annotation_matmul_base offline")
    shutil.copytree(run, out / "copied")
    listed = kbench("runs", "--out", str(out), "--json", env={inputs.LIMIT_ENV: "1.5"})
    assert listed.code == 0, listed.stderr
    assert sorted(r["status"] for r in json.loads(listed.stdout)) == ["ok", "unreadable"]


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


# --- malformed inputs are exit 2 or 4, never a kbench bug (70) ------------------------------------------------------

KINETO = DATA / "timeline_h100" / "kineto_trace.json"
NSYS = DATA / "timeline_h100" / "timeline.sqlite"
V2 = DATA / "validation_h100" / "matmul-v2" / "annotation"  # a kbench run folder: params.json, tiling/ beside
V2_PLAN = ["--plan", "matmul", "v2", "--m=4096", "--n=4096", "--k=4096", "--dtype=bfloat16"]
DEEP = "[" * 100_000 + "]" * 100_000


def _kernel_event(**fields: object) -> str:
    """The real trace with its first kernel event's fields replaced."""
    import json

    data = json.loads(KINETO.read_text())
    event = next(e for e in data["traceEvents"] if e.get("cat") == "kernel")
    event.update(fields)
    return json.dumps(data)


def _top(**fields: object) -> str:
    import json

    return json.dumps({**json.loads(KINETO.read_text()), **fields})


def _predicted(stage: object) -> str:
    import json

    return json.dumps({"from": "elsewhere", "stages": {"mm": stage}})


TRACES = {
    "nested-too-deep": lambda: '{"traceEvents": ' + DEEP + "}",
    "events-nested-too-deep": lambda: '{"traceEvents": [' + DEEP + "]}",
    "a-timestamp-past-64-bit-nanoseconds": lambda: _kernel_event(ts=1e300),
    "a-duration-past-64-bit-nanoseconds": lambda: _kernel_event(dur=1e20),
    "an-integer-of-5000-digits": lambda: '{"traceEvents": [' + "9" * 5000 + "]}",
}
IGNORED = {  # fields kbench reads only where they hold what it expects (the device's name, who wrote the trace)
    "device-properties-a-number": lambda: _top(deviceProperties=5),
    "device-properties-of-numbers": lambda: _top(deviceProperties=[5]),
    "other-data-a-number": lambda: _top(otherData=5),
}
SQLITE = {  # an nsys export with a column of the wrong type: sqlite stores what it is given
    "text-where-a-pid-belongs": "update CUPTI_ACTIVITY_KIND_KERNEL set globalPid = 'x' where rowid = 1",
    "text-where-a-start-belongs": "update CUPTI_ACTIVITY_KIND_KERNEL set start = 'soon' where rowid = 1",
    "a-kernel-ending-before-it-starts": "update CUPTI_ACTIVITY_KIND_KERNEL set end = start - 1000 where rowid = 1",
}
BESIDE = {  # files a run folder keeps beside its capture, read back with --plan
    "predicted.json": {
        "a-stage-that-is-a-number": lambda: _predicted(5),
        "a-stage-of-other-fields": lambda: _predicted({"lines": "x"}),
        "a-stage-with-no-fields": lambda: _predicted({}),
    },
    "tiling/mm.json": {
        "a-grid-of-text": lambda: '{"grid": "x", "registers": [1], "num_warps": {}}',
        "negative-warps": lambda: '{"grid": [1, 1, 1], "num_warps": -1}',
        "a-data-flow-of-text": lambda: '{"dataflow": {"tensors": "x"}}',
        "a-launch-writing-negative-bytes": lambda: (
            '{"dataflow": {"tensors": [], "launches": [{"kernel": "k", "reads": [], "writes": '
            '[{"name": "t", "bytes": -1}]}]}}'
        ),
        "an-instruction-mix-of-text": lambda: '{"instructions": {"tensor_ops": "x"}}',
        "compiled-kernels-of-text": lambda: '{"compiled_kernels": "x"}',
        "a-compiled-kernel-with-a-grid-of-text": lambda: '{"compiled_kernels": {"mm_kernel": {"grid": "x"}}}',
        # what ptxas and the SASS said of a kernel's wgmmas (issue 51), and the barriers in its loops
        "a-wgmma-advisory-of-text": lambda: '{"wgmma_serialized": "x"}',
        "a-wgmma-advisory-without-its-code": lambda: (
            '{"compiled_kernels": {"mm_kernel": {"wgmma_serialized": {"reason": "r", "message": "m"}}}}'
        ),
        "drained-hgmmas-of-text": lambda: '{"hgmma_drained": ["a", "b"]}',
        "drained-hgmmas-of-nothing": lambda: '{"compiled_kernels": {"mm_kernel": {"hgmma_drained": [null, null]}}}',
        "loop-barriers-a-number": lambda: '{"loop_barriers": 5}',
    },
}


def _analyze(*argv: str) -> None:
    from kbench.cli import analyze

    analyze.command(list(argv))


@pytest.mark.parametrize("case", list(TRACES))
def test_a_malformed_trace_is_a_malformed_capture(case: str, tmp_path: Path) -> None:
    path = tmp_path / f"{case}.json"
    path.write_text(TRACES[case]())
    with pytest.raises(ConfigError):
        _analyze(str(path), "--out", str(tmp_path / "out"))


@pytest.mark.slow
@pytest.mark.parametrize("case", list(IGNORED))
def test_a_trace_field_of_the_wrong_type_is_read_as_absent(case: str, tmp_path: Path) -> None:
    from kbench.errors import KbenchError

    path = tmp_path / f"{case}.json"
    path.write_text(IGNORED[case]())
    with pytest.raises(KbenchError) as real:  # a busy timeline without a plan: its tables, no report (exit 1)
        _analyze(str(KINETO), "--out", str(tmp_path / "out"))
    with pytest.raises(KbenchError) as odd:
        _analyze(str(path), "--out", str(tmp_path / "out"))
    assert (odd.value.exit_code, str(odd.value).split(":")[0]) == (real.value.exit_code, str(real.value).split(":")[0])


@pytest.mark.parametrize("case", list(SQLITE))
def test_an_nsys_export_of_the_wrong_types_is_a_malformed_capture(case: str, tmp_path: Path) -> None:
    import shutil
    import sqlite3

    path = tmp_path / f"{case}.sqlite"
    shutil.copy(NSYS, path)
    db = sqlite3.connect(path)
    db.execute(SQLITE[case])
    db.commit()
    db.close()
    with pytest.raises(ConfigError, match="is not a readable nsys SQLite export"):
        _analyze(str(path), "--out", str(tmp_path / "out"))


@pytest.mark.parametrize(("name", "case"), [(n, c) for n, cases in BESIDE.items() for c in cases])
def test_a_malformed_record_beside_a_capture_is_named_and_exit_4(name: str, case: str, tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(V2, run)
    (run / name).parent.mkdir(exist_ok=True)
    (run / name).write_text(BESIDE[name][case]())
    with pytest.raises(ConfigError, match=f"{re.escape(str(run / name))} is not an? (launch record|access prediction)"):
        _analyze(str(run / "profile.ncu-rep"), "--out", str(tmp_path / "out"), *V2_PLAN)


def test_the_records_of_real_run_folders_pass_their_checks(tmp_path: Path) -> None:
    import json

    from kbench.analysis import records
    from kbench.analysis.access_facts import Predicted, SiteFacts

    folders = {p.parent.parent for p in DATA.rglob("tiling/*.json")}
    assert folders
    for folder in folders:
        found = {p.stem: json.loads(p.read_text()) for p in (folder / "tiling").glob("*.json")}
        assert records.launches(found, folder) == found
    site = SiteFacts("load", "k.py:3", "k", 1, 2, 64, 60, 240, 4, 32.0, None, 0, (1, 0, 0), 8, None)
    made = Predicted("at n=64", 8.0, None, 30.0, None, site, 6.25, 6.25, site, 240, None, {"BLOCK": 64}, 1.0, "")
    assert records.predictions({"mm": json.loads(json.dumps(made.record()))}, tmp_path) == {"mm": made}


@pytest.mark.parametrize("text", [DEEP, '[{"frame": 5, "metrics": [], "children": 7}, {}]'], ids=["deep", "types"])
def test_a_malformed_proton_profile_is_a_malformed_capture(text: str, tmp_path: Path) -> None:
    from kbench.analysis import proton

    path = tmp_path / "odd.hatchet"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"odd\.hatchet"):
        proton.load(path)


@pytest.mark.parametrize("params", [DEEP, "[1, 2]"], ids=["deep", "a-list"])
def test_a_gpu_run_skips_an_earlier_access_run_it_cannot_read(params: str, tmp_path: Path) -> None:
    from kbench.modes.access import FILE, predicted_for
    from kbench.plan.discovery import load_version

    plan = load_version("vector_add").from_values({})
    run = tmp_path / "access" / plan.package / plan.slug() / "20260101T000000Z"
    run.mkdir(parents=True)
    (run / "params.json").write_text(params)
    (run / FILE).write_text("{}")
    assert predicted_for(tmp_path, plan, "any digest") == ({}, None)


RUN = Path(__file__).resolve().parents[1] / "docs" / "examples" / "mla_decode-h100-runs" / "v3-s1"
HUGE = 6 << 30  # a sparse file: no disk spent, but whoever reads it whole needs that much memory


def _memory_capped() -> None:
    """The kbench child may use 2 GB of address space: reading a HUGE file whole fails (MemoryError, exit 70)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("record", "command"),
    [("params.json", "runs"), ("result.json", "runs"), ("result.json", "compare"), ("result.json", "devlog")],
)
def test_a_huge_record_in_a_run_folder_is_refused_not_read_whole(record: str, command: str, tmp_path: Path) -> None:
    """The records a run folder keeps (params.json, result.json), planted huge: size-checked before they are read,
    as captures are: `runs` lists the folder as unreadable, `compare` and `devlog` refuse it in one line (exit 2)."""
    import shutil

    run = tmp_path / "out" / "event" / "mla_decode" / "n1" / "20260101T000000Z"
    shutil.copytree(RUN, run)
    (run / record).unlink()
    with (run / record).open("wb") as f:
        f.truncate(HUGE)
    args = {
        "runs": ("runs", "--out", str(tmp_path / "out")),
        "compare": ("compare", str(run), str(run)),
        "devlog": ("devlog", str(run), "--docs", str(tmp_path / "docs")),
    }[command]
    done = kbench(*args, preexec_fn=_memory_capped, timeout=300)
    if command == "runs":
        assert done.code == 0 and str(run) in done.stdout, done.stderr
        if record == "params.json":
            assert "unreadable" in done.stdout
    else:
        assert done.code == 2, done.stderr
        one_line(done.stderr, f"over the {256:,} MB kbench reads")


def test_the_mcp_tools_never_read_a_file_over_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from kbench.cli.mcp_server import build
    from tests.test_mcp_bounds import calls

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    (run / "report.md").write_text("x" * (2 << 20))
    monkeypatch.setenv("KBENCH_MAX_CAPTURE_MB", "1")
    (answer,) = calls(build(roots=[str(tmp_path)]), [("read_report", {"run": str(run)})])
    assert answer.is_error and "over the 1 MB kbench reads" in str(answer.content[0]), answer.content


@pytest.mark.slow
def test_a_devlog_or_points_file_over_its_limit_is_refused_not_read(tmp_path: Path) -> None:
    """The other files kbench reads back whole: the devlog it appends to and a sweep's points.jsonl."""
    import json
    import shutil

    run, docs = tmp_path / "run", tmp_path / "docs"
    shutil.copytree(RUN, run)
    docs.mkdir()
    (docs / "mla_decode.md").write_text("x" * (2 << 20))
    limited = {"KBENCH_MAX_CAPTURE_MB": "1"}
    done = kbench("devlog", str(run), "--docs", str(docs), env=limited)
    assert done.code == 2, done.stderr
    one_line(done.stderr, "mla_decode.md is 2 MB, over the 1 MB kbench reads")
    assert (docs / "mla_decode.md").stat().st_size == 2 << 20
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    asked = {"kernel": "vector_add", "versions": ["base"], "swept": {"n": ["64", "128"]}, "fixed": {},
             "mode": "access", "out": str(tmp_path / "p"), "bench_runs": 1}  # fmt: skip
    (sweep / "sweep.json").write_text(json.dumps(asked))
    (sweep / "points.jsonl").write_text("x" * (2 << 20))
    done = kbench("sweep", "--resume", str(sweep), "--out", str(tmp_path / "p"), env=limited)
    assert done.code == 2, done.stderr
    one_line(done.stderr, "points.jsonl is 2 MB, over the 1 MB kbench reads")
    assert not (tmp_path / "p").exists()


HOSTILE_SQLITE = {  # a few KB of schema that would cost without end: size limits cannot see it
    "endless-names": [
        "drop table StringIds",
        "create view StringIds as with recursive c(id) as (select 1 union all select id + 1 from c) "
        "select id, 'kernel' as value from c",
    ],
    "a-gigabyte-per-row": [
        "alter table CUPTI_ACTIVITY_KIND_KERNEL rename to k",
        "create table CUPTI_ACTIVITY_KIND_KERNEL as select * from k",
        "alter table CUPTI_ACTIVITY_KIND_KERNEL drop column shortName",
        "alter table CUPTI_ACTIVITY_KIND_KERNEL add column shortName as (zeroblob(900000000))",
        "drop table k",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(HOSTILE_SQLITE))
def test_an_nsys_export_whose_schema_would_cost_without_end_is_refused(case: str, tmp_path: Path) -> None:
    import shutil
    import sqlite3

    path = tmp_path / f"{case}.sqlite"
    shutil.copy(NSYS, path)
    db = sqlite3.connect(path)
    for statement in HOSTILE_SQLITE[case]:
        db.execute(statement)
    db.commit()
    db.execute("vacuum")
    db.close()
    assert path.stat().st_size < NSYS.stat().st_size * 2
    done = kbench("analyze", str(path), "--out", str(tmp_path / "out"), preexec_fn=_memory_capped, timeout=120)
    assert done.code == 4, done.stderr
    one_line(done.stderr, "is not a readable nsys SQLite export")
