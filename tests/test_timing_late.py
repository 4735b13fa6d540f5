"""CUDA-event repetitions whose host fell behind the GPU: a Ray executor's worker timed mla_decode's whole plan at
45 us where the local executor saw 25 (H100, 2026-11-25: the same tuned kernels, CUPTI stage times equal; the
whole plan's CUDA-event samples were bimodal, 34 and 825 us: the GPU waited for the host inside the timed window).
A repetition whose start event the GPU reached before the host had enqueued its end is timed again with a longer
hold; a fake GPU plays host stalls against the hold here."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kbench.capture import timing

BASE_US = 25.0
CYCLES_PER_US = 2000.0  # the fake GPU's clock: a hold of N cycles covers N / 2000 us of host time


class FakeGpu:
    """A host that takes ``stalls_us[i]`` to enqueue repetition i's launches after its start event; the GPU waits for
    the host whenever that outlasts the hold spun before the start."""

    def __init__(self, stalls_us: list[float]) -> None:
        self.stalls = list(stalls_us)
        self.hold_us = 0.0
        self.rep = 0
        self.holds: list[int] = []

    def sleep(self, cycles: int) -> None:
        self.hold_us = cycles / CYCLES_PER_US
        self.holds.append(cycles)

    def event(self, enable_timing: bool = True) -> Any:
        gpu = self

        class Event:
            def __init__(self) -> None:
                self.role = ""

            def record(self) -> None:
                if not self.role:
                    self.role = "start"
                    stall = gpu.stalls[gpu.rep] if gpu.rep < len(gpu.stalls) else 0.0
                    self.gap = max(0.0, stall - gpu.hold_us)
                    gpu.rep += 1

            def query(self) -> bool:
                return self.gap > 0  # the GPU finished the hold and reached start while the host still enqueued

            def elapsed_time(self, end: Any) -> float:
                return (BASE_US + self.gap) / 1000.0

        return Event()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(stalls: list[float], spin: bool = True) -> FakeGpu:
        gpu = FakeGpu(stalls)
        monkeypatch.setattr(torch.cuda, "Event", gpu.event)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
        if spin:
            monkeypatch.setattr(torch.cuda, "_sleep", gpu.sleep, raising=False)
        else:
            monkeypatch.delattr(torch.cuda, "_sleep", raising=False)
        return gpu

    return install


def test_repetitions_the_host_was_late_for_are_timed_again_with_a_longer_hold(fake: Any) -> None:
    # every 4th repetition the host stalls 800 us (a GIL switch), longer than the 200 us hold
    stalls = [800.0 if i % 4 == 0 else 20.0 for i in range(400)]
    gpu = fake(stalls)
    [us], late = timing._repetitions([lambda: None], 100, None, timing.HOLD_CYCLES)
    assert len(us) == 100
    assert max(us) == BASE_US  # no host gap inside any kept sample
    assert late.retimed == 2 and late.kept == 0  # 200 -> 400 -> 800 us of hold: then the host keeps up
    assert late.hold_cycles == 800 * CYCLES_PER_US == max(gpu.holds)
    assert "timed again" in late.words


def test_a_host_that_keeps_up_changes_nothing(fake: Any) -> None:
    gpu = fake([20.0] * 100)
    [us], late = timing._repetitions([lambda: None], 100, None, timing.HOLD_CYCLES)
    assert us == [BASE_US] * 100
    assert (late.retimed, late.kept, late.words) == (0, 0, "")
    assert set(gpu.holds) == {timing.HOLD_CYCLES}


def test_late_repetitions_are_kept_and_counted_when_the_retries_run_out(fake: Any) -> None:
    # a host always slower than the longest hold: the samples keep their gaps, and the method says how many
    fake([1e6] * 1000)
    [us], late = timing._repetitions([lambda: None], 10, None, timing.HOLD_CYCLES)
    assert len(us) == 10 and min(us) > BASE_US
    assert late.kept == 10 and late.retimed <= timing.RETIME_X * 10
    assert timing.HOLD_CYCLES < late.hold_cycles <= timing.MAX_HOLD_CYCLES
    assert "kept although the host was late" in timing.Samples(us, 3, False, "no flush", True, late).method


def test_without_a_gpu_spin_late_repetitions_are_counted_not_retimed(fake: Any) -> None:
    fake([800.0, 0.0, 0.0], spin=False)
    [us], late = timing._repetitions([lambda: None], 3, None, timing.HOLD_CYCLES)
    assert (late.retimed, late.kept) == (0, 1)
    assert sorted(us) == [BASE_US, BASE_US, BASE_US + 800.0]


@pytest.mark.gpu
def test_a_host_slower_than_the_hold_does_not_change_a_whole_plan_time() -> None:
    """What the Ray worker's host did to the whole-plan time, on the GPU: the host takes 0.5 ms between a plan's two
    launches (a slow host thread: the Ray worker's Python steps took 4x the driver's), longer than the 0.2 ms hold,
    so the GPU waits inside the timed window unless the hold grows."""
    import statistics
    import time

    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(a)

    def plan(host_us: float) -> None:
        torch.mm(a, a, out=out)
        until = time.perf_counter() + host_us * 1e-6
        while time.perf_counter() < until:
            pass
        torch.mm(out, a, out=out)

    quiet = timing.time_cuda(lambda: plan(0.0), 100)
    slow = timing.time_cuda(lambda: plan(500.0), 100)
    q, b = statistics.median(quiet.us), statistics.median(slow.us)
    late = getattr(slow, "late", None)  # (read so: the same test times kbench's timing before it retimed)
    print(f"whole plan: quiet host {q:.2f} us, host 0.5 ms between launches {b:.2f} us; {late}")
    assert b <= 1.10 * q + 2.0, (q, b, late)
