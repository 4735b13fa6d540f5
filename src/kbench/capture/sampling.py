"""The GPU's performance monitors sampled in-process while a stage runs (CUPTI PM sampling, through NVIDIA's
``cupti-python``): event mode's counters, without ncu and without replay.

One sampling round per stage, after every stage's timings and the whole plan's (the collector is enabled only then:
it cannot disturb them): ``reps`` repetitions, each an L2 flush, a one-thread spin of ``GAP_SAMPLES`` sample widths
(the flush's traffic never shares a sample with the stage) and the stage, inside one PyTorch-profiler session
(CUDA activity: the kernel records) with PM sampling started around it. The raw record (samples, kernel records,
the clock pairs that place one in the other) is kept; kbench.analysis.sampling reduces it. Measured on the H100
(torch 2.11, cupti-python 13.4): with the profiler on, CUPTI's timestamps (and the samples') are the profiler's own
clock (TSC ticks, 2.1 per ns), its kernel records Unix nanoseconds; a pair of
``cupti.get_timestamp()`` and ``time.time_ns()`` read together and the samples' spacing place the samples within a
few microseconds.

What a chip offers is read from CUPTI (its single-pass sets), never assumed from ncu's names: each wanted metric
the chip's set lacks or a configuration refuses is left out, and the metrics used are recorded. Configuring one
collector twice broke its decode on the H100 (ERROR_UNKNOWN, then a crash): every configuration gets its own.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

from kbench.analysis.sampling import INTERVAL_ENV as INTERVAL
from kbench.analysis.sampling import WANTED
from kbench.capture.cupti import kineto_session

INTERVAL_NS = 20_000  # one sample per 20 us of GPU time (KBENCH_SAMPLING_INTERVAL_US: another, 1 to 1000 us)
BUFFER_BYTES = 512 << 20  # the hardware buffer (~2.7 KB a sample: ~190,000 samples, 3.8 s at 20 us)
GAP_SAMPLES = 2  # the spin between the flush and the stage, in sample widths
CYCLES_PER_US = 1_980  # the gap's length in SM cycles per microsecond (an H100's top clock; only a length)
MIN_WINDOW_US = 2_000.0  # a round samples at least this much of the stage's GPU time (100 samples at 20 us) ...
MAX_REPS = 200  # ... in at most this many repetitions
OFF = "KBENCH_SAMPLING"  # =0: event mode samples nothing (read per run)


def wanted() -> bool:
    """Whether this run samples (``KBENCH_SAMPLING=0`` turns it off)."""
    return os.environ.get(OFF, "1") != "0"


def interval_ns() -> int | str:
    """This run's sampling interval (``KBENCH_SAMPLING_INTERVAL_US``, read per run), or why the value is refused."""
    raw = os.environ.get(INTERVAL)
    if raw is None:
        return INTERVAL_NS
    try:
        us = float(raw)
    except ValueError:
        return f"{INTERVAL}={raw!r} is not a number of microseconds"
    if not 1.0 <= us <= 1000.0:
        return f"{INTERVAL}={raw} is outside 1 to 1000 us"
    return int(us * 1000)


def reps_for(stage_us: float, most: int) -> int:
    """Repetitions for a stage of ``stage_us``: enough for ``MIN_WINDOW_US`` of it, at least 3, at most ``most``."""
    need = int(MIN_WINDOW_US / stage_us) + 1 if stage_us > 0 else most
    return max(3, min(need, most, MAX_REPS))


def _cupti() -> Any:
    import cupti.cupti as cc
    from cupti import pm_sampling, profiler_host

    return cc, pm_sampling, profiler_host


def _first(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else ""


class Sampler:
    """PM sampling on one device, configured once for this run's metrics (``open``); ``round`` samples a stage."""

    def __init__(
        self, chip: str, sets: dict[str, list[str]], metrics: dict[str, str], refused: list[str], interval: int
    ) -> None:
        self.chip, self.sets, self.metrics, self.refused, self.interval = chip, sets, metrics, refused, interval
        self.collector: Any = None

    @classmethod
    def open(cls, device_index: int = 0, interval: int = INTERVAL_NS) -> Sampler | str:
        """A configured sampler, or why there is none (one line: not installed, no permission, no such chip)."""
        try:
            _, pm_sampling, profiler_host = _cupti()
        except ImportError as e:
            return f"cupti-python is not installed ({e.name or e}): pip install 'kbench[cupti]'"
        except Exception as e:  # the binding's own import failing (its libraries)
            return f"cupti-python could not load: {type(e).__name__}: {e}"
        try:
            probe = pm_sampling.Collector(device_index)
            probe.enable()
            chip = probe._chip_name
            probe.disable()
            sets = {
                s: profiler_host.get_metrics_in_single_pass_set(chip, s)
                for s in profiler_host.get_single_pass_sets(chip)
            }
        except PermissionError:
            return (
                "PM sampling not permitted (ERR_NVGPUCTRPERM: GPU performance counters are restricted to admin users)"
            )
        except Exception as e:
            return (
                f"PM sampling unavailable on this GPU: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            )
        return cls._configured(device_index, str(chip), sets, interval)

    @classmethod
    def _configured(cls, device_index: int, chip: str, sets: dict[str, list[str]], interval: int) -> Sampler | str:
        from cupti import pm_sampling

        # a set's listing names raw counters (dramc__throughput), not every metric PM sampling accepts
        # (dram__throughput): what a configuration accepts decides
        metrics = dict(WANTED)
        refused: list[str] = []
        while metrics:
            collector = pm_sampling.Collector(device_index)
            try:
                collector.enable()
                collector.configure(
                    metrics=list(metrics.values()), hardware_buffer_size=BUFFER_BYTES, sampling_interval=interval
                )
            except Exception as e:  # ValueError for a refused set; the binding's cuptiError for a bad name
                collector.disable()
                if len(metrics) == 1:
                    return f"PM sampling refused every metric on {chip} ({type(e).__name__}: {e})"
                # drop the last wanted metric and try again (the first ones answer the Stages table)
                refused.append(metrics.popitem()[1])
                continue
            sampler = cls(chip, sets, metrics, refused, interval)
            sampler.collector = collector
            return sampler
        return f"PM sampling offers none of kbench's metrics on {chip}"

    def close(self) -> None:
        if self.collector is not None:
            with contextlib.suppress(Exception):
                self.collector.disable()
            self.collector = None

    def describe(self) -> dict[str, Any]:
        """What the chip offered and what this run sampled (report.json keeps it)."""
        from importlib.metadata import version

        return {
            "version": version("cupti-python"),
            "chip": self.chip,
            "sets": sorted(self.sets),
            "metrics": self.metrics,
            "refused": self.refused,
            "interval_ns": self.interval,
        }

    def round(
        self, fn: Callable[[], object], reps: int, flush: Callable[[], object] | None, flush_items: int
    ) -> dict[str, Any] | str:
        """The raw record of ``reps`` sampled repetitions of ``fn`` (see the module), or why there is none."""
        import torch
        from torch._C._autograd import DeviceType, _disable_profiler, _enable_profiler, _prepare_profiler

        cc, _, _ = _cupti()
        gap = int(GAP_SAMPLES * self.interval / 1000 * CYCLES_PER_US)
        anchors: list[list[int]] = []

        def anchor() -> None:
            before = time.time_ns()
            ts = int(cc.get_timestamp())
            after = time.time_ns()
            anchors.append([ts, (before + after) // 2, after - before])

        try:
            config, activities = kineto_session()
            torch.cuda.synchronize()
            _prepare_profiler(config, activities)
            _enable_profiler(config, activities)
            try:
                self.collector.start()
                anchor()
                for _ in range(reps):
                    if flush is not None:
                        flush()
                    torch.cuda._sleep(gap)
                    fn()
                torch.cuda._sleep(gap)
                torch.cuda.synchronize()
                anchor()
                self.collector.stop()
            finally:
                result = _disable_profiler()
            # room for every sample of the sampled wall time, with a margin (the image grows with it)
            took_ns = anchors[-1][1] - anchors[0][1]
            data = self.collector.decode(max_samples=int(1.5 * took_ns / self.interval) + 200)
            samples = [[s.start_timestamp, s.end_timestamp, list(s.metric_values)] for s in data]
        except Exception as e:  # the profiler or CUPTI failing mid-round: this stage is not sampled
            with contextlib.suppress(Exception):
                self.collector.stop()
            return f"PM sampling failed: {type(e).__name__}: {_first(e)}"
        items: list[tuple[str, int, int]] = sorted(
            (
                (str(e.name()), int(e.start_ns()), int(e.duration_ns()))
                for e in result.events()
                if e.device_type() == DeviceType.CUDA
            ),
            key=lambda i: i[1],
        )
        return {
            "reps": reps,
            "flush_items": flush_items,
            "gap_items": 1,
            "interval_ns": self.interval,
            "metrics": list(self.metrics.values()),
            "anchors": anchors,
            "samples": samples,
            "items": items,
        }


def start() -> Sampler | str | None:
    """A sampler of the current CUDA device for one run (its caller closes it), or why there is none; with
    ``KBENCH_SAMPLING=0``, why not (None: not attempted, which only a replay of a recorded run says)."""
    if not wanted():
        return f"PM sampling off ({OFF}=0)"
    interval = interval_ns()
    if isinstance(interval, str):
        return interval
    try:
        import torch

        index = torch.cuda.current_device()
    except (ImportError, RuntimeError, AssertionError) as e:  # no CUDA here
        return f"PM sampling needs a CUDA device: {_first(e)}"
    return Sampler.open(index, interval)
