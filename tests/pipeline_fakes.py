"""The event pipeline on a CPU: its GPU-facing calls replaced at their boundary (the GPU check, device detection,
the clock control, preparation, CUDA-event timing), with real H100 samples replayed as the measurement."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kbench.analysis.devices import load_devices, resolve
from kbench.capture import clocks, gpu, prepare
from kbench.capture.cupti import Repetitions
from kbench.capture.phases import Stopwatch
from kbench.capture.prepare import Prepared, PreparedStage
from kbench.capture.sampling import Sampler
from kbench.capture.timing import Samples
from kbench.modes import event
from kbench.plan import autotune
from kbench.plan.base import Launch
from tests.clock_fakes import FakeClocks

H100 = "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class Recorded(Samples):
    """Samples of a real run, reporting the method that run reported."""

    recorded_method: str = ""

    @property
    def method(self) -> str:
        return self.recorded_method


def prepared_without_gpu(plan: Any, device: Any, seed: int) -> Prepared:
    """Every stage at its first config with a launch that does nothing."""
    prep = Prepared(plan=plan, device="cuda", ws=None)
    for s in plan.checked_stages():
        cfg = dict(s.tuning[0])
        fixed = autotune.TuneResult(best=cfg, history=[], source="fixed", path=None)
        prep.stages.append(PreparedStage(s, cfg, Launch(fn=lambda: None), fixed))
    return prep


def offline_gpu(monkeypatch: pytest.MonkeyPatch) -> FakeClocks:
    """An H100 as far as the pipeline can tell, with steady stand-in clocks (returned, to inspect)."""
    fake = FakeClocks()
    monkeypatch.setattr(gpu, "require_cuda", lambda what, torch=True: None)
    monkeypatch.setattr(gpu, "tool_versions", lambda torch=True: {"torch": "2.11.0+cu130", "triton": "3.6.0"})
    monkeypatch.setattr(gpu, "active_device", lambda table=None, torch=True: resolve(load_devices(), H100))
    monkeypatch.setattr(clocks, "control", fake.as_control)
    monkeypatch.setattr(prepare, "prepare_on_gpu", prepared_without_gpu)
    return fake


class Untimed(Stopwatch):
    """A stopwatch for replays: every phase takes no time."""

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.seconds.setdefault(name, 0.0)
        yield


class Resampled(Sampler):
    """A sampler that hands back a recorded run's sampling rounds (samples.json), in stage order."""

    def __init__(self, found: dict[str, Any]) -> None:
        about = found.get("sampler", {})
        sets: dict[str, list[str]] = {s: [] for s in about.get("sets", [])}
        super().__init__(about.get("chip", "?"), sets, about.get("metrics", {}), [], about.get("interval_ns", 20_000))
        self.about, self.rounds = about, iter(found.get("stages", {}).values())

    @classmethod
    def of(cls, path: Path) -> Resampled | str | None:
        if not path.exists():
            return None
        found = json.loads(path.read_text())
        return found["not_available"] if "not_available" in found else cls(found)

    def describe(self) -> dict[str, Any]:
        return dict(self.about)

    def round(self, fn: Callable[[], object], reps: int, flush: object, flush_items: int) -> dict[str, Any] | str:
        got = next(self.rounds, {"not_measured": "the replayed run recorded no round for this stage"})
        return str(got["not_measured"]) if "not_measured" in got else dict(got)

    def close(self) -> None:
        pass


def replay(monkeypatch: pytest.MonkeyPatch, timings_json: Path) -> None:
    """CUDA-event timing replaced by a real run's samples: each stage's, then the whole plan's."""
    timings = json.loads(timings_json.read_text())
    entries = [*timings["stages"].values(), timings["plan"]]
    recorded: Iterator[Samples] = iter(
        Recorded(e["samples_us"], int(e.get("warmup_reps") or 0), False, "", recorded_method=timings["method"])
        for e in entries
    )
    cupti = iter(
        Repetitions(e["cupti_us"], e.get("cupti_sm_mhz") or [None] * len(e["cupti_us"]))
        if e.get("cupti_us")
        else "the replayed run recorded no CUPTI samples"
        for e in timings["stages"].values()
    )
    monkeypatch.setattr(event, "time_cuda", lambda fn, reps, cuda_graph=False: next(recorded))
    monkeypatch.setattr(
        event, "time_cupti", lambda fn, reps, flush, flush_items, rest_us=0.0, settle_us=0.0: next(cupti)
    )
    # the census the run recorded beside its timings (kernels.json), stage by stage; none where it recorded none
    kernels = timings_json.parent / "kernels.json"
    census = iter(json.loads(kernels.read_text())["stages"].values() if kernels.exists() else [])
    monkeypatch.setattr(event, "census", lambda fn: next(census, None))
    # the PM-sampling rounds the run recorded (samples.json), stage by stage; none attempted where it recorded none
    monkeypatch.setattr(event, "start_sampling", lambda: Resampled.of(timings_json.parent / "samples.json"))
    monkeypatch.setattr(event, "work_items", lambda fn: 1)
    monkeypatch.setattr(event, "L2Flush", lambda nbytes: type("Flush", (), {"words": "no flush (replayed)"})())
    monkeypatch.setattr(event, "l2_flush_bytes", lambda: 0)
    # a replay times nothing: its stage windows last microseconds, and whether a 20 ms clock sample falls into
    # one is chance; no window holds a sample (tests/test_clocks.py covers the windows)
    monkeypatch.setattr(event, "window", lambda samples, start, end: None)
    monkeypatch.setattr(event, "Stopwatch", Untimed)  # nor do its phases take a repeatable time


def failing(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """CUDA-event timing that raises ``error`` (a crash in the kernel, Ctrl-C, SIGTERM)."""

    def timed(fn: Callable[[], object], reps: int, cuda_graph: bool = False) -> Samples:
        raise error

    monkeypatch.setattr(event, "time_cuda", timed)
