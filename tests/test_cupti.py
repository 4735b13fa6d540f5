"""CUPTI stage durations: GPU work read from a real PyTorch-profiler trace (an H100's, ../shared/fixtures), and
repetitions cut by counting the flush's and the stage's items."""

from __future__ import annotations

import json

import pytest

from kbench.analysis.audit import cross_check
from kbench.capture.cupti import (
    CYCLES_PER_US,
    MAX_SETTLE_US,
    PROBE_CYCLES,
    Repetitions,
    after_events,
    gpu_items,
    per_repetition,
    spins,
)
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
    assert per_repetition(items, flush=1, stage=2, reps=2) == Repetitions([12.0, 13.0], [None, None])
    assert per_repetition(items, flush=1, stage=2, reps=3) == (
        "CUPTI recorded 6 GPU activities, not 3 x (1 flush + 2 stage)"
    )
    assert per_repetition(items, flush=1, stage=0, reps=2) == "the stage put no work on the GPU that CUPTI recorded"


def test_clock_probes_around_each_repetition_give_its_sm_clock() -> None:
    # per repetition: flush, probe (short, long spin), the stage's kernel, probe; the spins' cycle difference over
    # their duration difference is the clock: 20000 cycles in 10.1 us = 1980 MHz before, 13.33 us = 1500 after
    cycles = PROBE_CYCLES[1] - PROBE_CYCLES[0]
    rep = [30.0, 1.7, 1.7 + cycles / 1980, 200.0, 1.9, 1.9 + cycles / 1500]
    items = [(float(t), d) for t, d in enumerate(rep * 2)]
    got = per_repetition(items, flush=1, stage=1, reps=2, probed=True)
    assert isinstance(got, Repetitions) and got.us == [200.0, 200.0]
    assert got.sm_mhz == [pytest.approx(1740.0), pytest.approx(1740.0)]
    # a probe whose long spin was not longer than its short one reads nothing; the other side still counts
    items[2] = (2.0, 1.0)
    got = per_repetition(items, flush=1, stage=1, reps=2, probed=True)
    assert isinstance(got, Repetitions) and got.sm_mhz[0] == pytest.approx(1500.0)
    assert per_repetition(items[:-1], flush=1, stage=1, reps=2, probed=True) == (
        "CUPTI recorded 11 GPU activities, not 2 x (1 flush + 2 x 2 probe + 1 stage)"
    )


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


def test_a_probed_stage_clock_is_the_probes_median_with_nvml_reasons_beside_it() -> None:
    from kbench.analysis.clocks import ClockWindow, probed, sagged

    nvml: ClockWindow = {"sm_mhz": 1980.0, "samples": 4, "slowdown": ["power cap"]}
    got = probed([1990.0, None, 1700.0, 1710.0], nvml)
    assert got == {
        "sm_mhz": 1710.0,
        "samples": 3,
        "slowdown": ["power cap"],
        "source": "probe",
        "range_mhz": [1700.0, 1990.0],
    }
    assert probed([None], nvml) is nvml and probed(None, None) is None
    # NVML read 1980 MHz; the probes saw the sag it missed, and the figure is marked
    note = sagged("mm", got, 1980)
    assert note is not None and note.startswith("mm was timed at a median SM clock of 1710 MHz, 14% below")
    lines = cross_check({"mm": {"samples_us": [250.0], "cupti_us": [220.0], "events_clock": nvml, "clock": got}})
    assert lines[0].endswith("1980 MHz while timed by events, 1710 by CUPTI (read on the GPU around each repetition))")


def test_the_first_rest_lets_a_pulled_down_clock_recover() -> None:
    assert spins(3, 0.0, 5_000.0) == [0, 0, 0]  # locked clocks: no rest, no settling either
    assert spins(3, 10.0, 5_000.0) == [5_000 * CYCLES_PER_US, 10 * CYCLES_PER_US, 10 * CYCLES_PER_US]
    assert spins(2, 10.0, 1.0) == [10 * CYCLES_PER_US] * 2  # a settle shorter than the rest changes nothing
    assert spins(2, 10.0, 1e12)[0] == int(MAX_SETTLE_US * CYCLES_PER_US)  # bounded
    assert spins(0, 10.0, 100.0) == []


def test_the_rests_after_event_repetitions_follow_them() -> None:
    assert after_events([10.0, 30.0, 20.0], 3.0) == {"rest_us": 60.0, "settle_us": 180.0}
    assert after_events([10.0, 30.0, 20.0], 0.0) == {"rest_us": 0.0, "settle_us": 0.0}  # clocks locked


def test_the_kineto_entry_points_exist_in_this_torch() -> None:
    # CUPTI records come through the autograd profiler's own entry points (torch.profiler's first session imports
    # torch._dynamo, sympy and FSDP: 5-7 s of a fresh process on the H100); the torch CI installs must have them
    from kbench.capture.cupti import kineto_session

    config, activities = kineto_session()
    assert config is not None and len(activities) == 1


def test_tracing_falls_back_to_torch_profiler_where_the_entry_points_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench.capture import cupti

    def differs() -> None:
        raise TypeError("ProfilerConfig(): incompatible constructor arguments")

    monkeypatch.setattr(cupti, "kineto_session", differs)
    monkeypatch.setattr(cupti, "_chrome", lambda body: [(1.0, 2.0)])
    assert cupti._traced(lambda: None) == [(1.0, 2.0)]
