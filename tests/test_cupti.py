"""CUPTI stage durations: GPU work read from a real PyTorch-profiler trace (an H100's, ../shared/fixtures), and
repetitions cut by counting the flush's and the stage's items."""

from __future__ import annotations

import json

from kbench.analysis.audit import cross_check
from kbench.capture.cupti import gpu_items, per_repetition
from tests.conftest import DATA


def test_gpu_work_of_a_real_trace() -> None:
    trace = json.loads((DATA / "timeline_h100" / "kineto_trace.json").read_text())
    items = gpu_items(trace)
    # kernels and memsets in time order; runtime calls and CPU ops left out
    assert len(items) == 37 and items == sorted(items)
    assert all(d >= 0 for _, d in items)


def test_repetitions_are_cut_by_counting() -> None:
    # per repetition: 1 flush item, then the stage's 2 kernels
    items = [(float(t), d) for t, d in enumerate([30.0, 5.0, 7.0, 31.0, 5.5, 7.5])]
    assert per_repetition(items, flush=1, stage=2, reps=2) == [12.0, 13.0]
    assert per_repetition(items, flush=1, stage=2, reps=3) == (
        "CUPTI recorded 6 GPU activities, not 3 x (1 flush + 2 stage)"
    )
    assert per_repetition(items, flush=1, stage=0, reps=2) == "the stage put no work on the GPU that CUPTI recorded"


def test_cross_check_lines() -> None:
    lines = cross_check(
        {
            "add": {
                "samples_us": [269.0, 270.0, 271.0],
                "cupti_us": [259.0, 260.0, 261.0],
                "events_clock": {"sm_mhz": 1500, "samples": 9, "slowdown": ["power cap"]},
                "clock": {"sm_mhz": 1980.0, "samples": 9, "slowdown": []},
            },
            "mm": {"samples_us": [10.0], "cupti_us": None, "cupti_note": "the PyTorch profiler failed: X"},
        }
    )
    assert lines[0].startswith("add: CUDA events 270.00 us, CUPTI 260.00 us (+10.00 us, +3.8%")
    assert lines[0].endswith("; median SM clock 1500 MHz while timed by events, 1980 by CUPTI)")
    assert lines[1] == "mm: no CUPTI figure (the PyTorch profiler failed: X); its duration is the CUDA-event median"


def test_where_the_time_went() -> None:
    from kbench.capture.phases import Stopwatch, describe

    watch = Stopwatch()
    with watch.phase("compile"):
        pass
    assert list(watch.seconds) == ["compile"]
    line = describe({"allocation, autotuning, compilation and data flow": 25.1, "CUPTI timing": 1.1, "check": 0.4})
    assert line == (
        "Where the capture's 26.6 s went: allocation, autotuning, compilation and data flow 25.1 s (94%), "
        "CUPTI timing 1.1 s (4%), check 0.4 s (2%)"
    )
