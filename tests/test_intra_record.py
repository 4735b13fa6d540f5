"""The intra-kernel record API: the buffer's words decoded (overflow, unpaired records, a wrapped timer), the
device side compiled for an H100 without one (records present with ENABLE_PROFILING, gone without), and a kernel
recording on the CPU under Triton's interpreter, exported as a Chrome trace and read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench.analysis import intra
from kbench.errors import KbenchError
from kbench.intra_layout import HEADER, MAGIC, TIME_BITS, WRITTEN

ROOT = Path(__file__).resolve().parents[1]


def word(ns: int, task: int, start: bool) -> int:
    return ((ns & ((1 << TIME_BITS) - 1)) << 16) | (task << 1) | int(start)


def buffer(ctas: list[tuple[int, list[int]]], slots: int) -> list[int]:
    """A buffer as the kernel leaves it: per CTA its SM and records (a count above the region's room: overflow)."""
    per = slots // len(ctas)
    words = [MAGIC, slots, len(ctas), 0] + [0] * slots
    for i, (sm, records) in enumerate(ctas):
        base = HEADER + i * per
        words[base] = len(records) | (sm << 32) | WRITTEN
        for j, w in enumerate(records[: per - 1]):
            words[base + 1 + j] = w
    return words


def test_records_pair_into_tasks_with_cta_sm_and_time() -> None:
    words = buffer(
        [
            (7, [word(1000, 0, True), word(1960, 0, False), word(2000, 1, True), word(2032, 1, False)]),
            (3, [word(1032, 0, True), word(2024, 0, False)]),
        ],
        slots=10,
    )
    d = intra.decode(words, ["mainloop", "store"])
    assert (d.ctas, d.recorded_ctas, d.slots_per_cta, d.dropped, d.unpaired) == (2, 2, 4, 0, 0)
    assert [(r.cta, r.sm, r.task, r.start_us, r.end_us) for r in d.records] == [
        (0, 7, "mainloop", 0.0, 0.96),
        (0, 7, "store", 1.0, 1.032),
        (1, 3, "mainloop", 0.032, 1.024),
    ]
    assert d.step_ns == 8  # every time a multiple of 8 ns after the first


def test_an_overflow_is_counted_never_silent() -> None:
    many = [word(100 * i, 0, i % 2 == 0) for i in range(10)]  # 5 tasks, 10 records
    d = intra.decode(buffer([(0, many), (1, many[:2])], slots=12), ["t"])  # 6 slots a CTA: 5 records fit
    assert (d.dropped, d.overflowed_ctas, d.most_records) == (5, 1, 10)
    assert d.unpaired == 1  # the fifth record, a start, lost its end to the overflow
    assert len(d.records) == 3  # 2 whole tasks of CTA 0, 1 of CTA 1


def test_a_timer_that_wrapped_between_records_is_unwrapped() -> None:
    top = (1 << TIME_BITS) - 50
    d = intra.decode(buffer([(0, [word(top, 0, True), word(top + 100, 0, False)])], slots=4), ["t"])
    assert d.records[0].us == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ([1, 2, 3, 4], "not a kbench profiler buffer"),
        ([MAGIC, 8, 0, 0, *[0] * 8], "no CTA created a profiler"),
        ([MAGIC, 8, 5, 0, *[0] * 8], "give max_num_profile_slots >= 10"),
        ([MAGIC, 8, 2, 0, *[0] * 8], "holds no records"),
    ],
)
def test_a_buffer_no_kernel_filled_is_one_line(words: list[int], message: str) -> None:
    with pytest.raises(KbenchError, match=message):
        intra.decode(words, ["t"])


def test_the_export_reads_back_as_the_same_records() -> None:
    words = buffer([(2, [word(0, 0, True), word(640, 0, False)]), (5, [word(64, 0, True), word(1000, 0, False)])], 8)
    d = intra.decode(words, ["mma"])
    text = json.dumps(intra.chrome_trace(d.records, "mm_kernel", {"dropped_records": 0}))
    assert intra.from_proton_trace(text) == d.records
    assert json.loads(text)["traceEvents"][0]["pid"] == "mm_kernel Core2 CTA0"


def _run(script: str, *args: str, interpret: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    path = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env.update({"PYTHONPATH": path, **({"TRITON_INTERPRET": "1"} if interpret else {})})
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_the_shipped_matmul_records_only_with_profiling_on() -> None:
    found = _run("intra_compile.py", interpret=False)
    if "error" in found:
        pytest.skip(f"Triton cannot compile for sm_90 on this machine: {found['error']}")
    on, off = found["True"], found["False"]
    assert isinstance(on, dict) and isinstance(off, dict)
    assert on["%globaltimer"] == 4 and on["%smid"] == 1  # mainloop and store, start and end; the SM once
    assert off["%globaltimer"] == 0 and off["%smid"] == 0  # every record compiled away
    assert off["st.global"] < on["st.global"]


def _interpreted(tmp_path: Path, *args: str) -> dict[str, object]:
    pytest.importorskip("numpy")  # Triton's interpreter computes with numpy
    return _run("intra_interp.py", str(tmp_path / "trace"), *args, interpret=True)


@pytest.mark.slow
def test_a_kernel_records_under_the_interpreter_and_the_trace_reads_back(tmp_path: Path) -> None:
    out = _interpreted(tmp_path, "64")
    assert out["x"] == [1.0] * 5  # the kernel's own work is untouched
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert trace["otherData"]["ctas"] == 5 and trace["otherData"]["dropped_records"] == 0
    a = intra.analyse(intra.from_proton_trace(json.dumps(trace)))
    assert a.ctas == 5 and a.task_events == {"load": 5, "store": 5}


@pytest.mark.slow
def test_an_overflow_under_the_interpreter_is_in_the_trace(tmp_path: Path) -> None:
    _interpreted(tmp_path, "15")  # 3 slots a CTA: 2 of its 4 records fit
    meta = json.loads((tmp_path / "trace.json").read_text())["otherData"]
    assert (meta["dropped_records"], meta["overflowed_ctas"], meta["slots_per_cta"]) == (10, 5, 2)


@pytest.mark.slow
def test_with_profiling_off_the_buffer_is_untouched(tmp_path: Path) -> None:
    out = _interpreted(tmp_path, "64", "off")
    assert out == {"untouched": True, "x": [1.0] * 5}
