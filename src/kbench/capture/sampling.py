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

What a chip offers is read from CUPTI, never assumed from ncu's names: its single-pass sets are recorded, and a
wanted metric a configuration refuses is left out (the sets list raw counters, not every metric PM sampling accepts),
the metrics used recorded too. One collector configured over and over (the first probe tried 15 configurations on
it) broke its decode on the H100 (ERROR_UNKNOWN, then a crash): every configuration tried gets its own.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

from kbench import metric_libraries
from kbench.analysis.sampling import INTERVAL_ENV as INTERVAL
from kbench.analysis.sampling import WANTED
from kbench.capture.cupti import gpu_events, in_session, kineto_session
from kbench.errors import first_line

# one sample per 20 us of GPU time (KBENCH_SAMPLING_INTERVAL_US: another, 10 to 1000 us). Finer ones measured
# worse on the H100 against ncu: at 5 us a 19-us stage read 47.7% DRAM (ncu 69.5%), at 2 us a 30-us GEMM read 45.7%
# DRAM and 23.7% tensor pipe (ncu 17.0%, 69.6%); at 20 us 14 of 15 stages of 20 us or more read DRAM within 5
# points of ncu (the 15th explained in docs/benchmarks/sampling-h100.txt)
INTERVAL_NS = 20_000
MIN_US, MAX_US = 10.0, 1000.0
# the hardware buffer: configuring it took 0.64 s at 512 MB, 0.21 at 128, 0.17 at 64, 0.14 at 32 (H100,
# scripts/pm-sampling-costs.py); at up to SAMPLE_BYTES a sample, 64 MB hold 16,000 samples (0.33 s at 20 us)
BUFFER_BYTES = 64 << 20
SAMPLE_BYTES = 4096  # assumed per sample of 9 metrics, with room (not measured: a round's decode says any overflow)
REP_OVERHEAD_US = 100.0  # a repetition's flush, gap and launches beside the stage, for the round's length
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
    if not MIN_US <= us <= MAX_US:
        return f"{INTERVAL}={raw} is outside {MIN_US:g} to {MAX_US:g} us"
    return int(us * 1000)


def reps_for(stage_us: float, most: int, interval: int = INTERVAL_NS) -> int:
    """Repetitions for a stage of ``stage_us``: enough for ``MIN_WINDOW_US`` of it, at least 3, at most ``most``; and
    never more than half the hardware buffer holds at ``interval`` (one, for a stage longer than that)."""
    need = int(MIN_WINDOW_US / stage_us) + 1 if stage_us > 0 else most
    room_us = BUFFER_BYTES / SAMPLE_BYTES * interval / 1e3 / 2
    fits = max(1, int(room_us / (stage_us + REP_OVERHEAD_US)))
    return min(max(3, min(need, most, MAX_REPS)), fits)


def _cupti() -> Any:
    import cupti.cupti as cc
    from cupti import pm_sampling, profiler_host

    return cc, pm_sampling, profiler_host


def _disable(collector: Any) -> None:
    """Give the GPU's counters back (an ncu in any other process cannot profile while a collector is enabled)."""
    with contextlib.suppress(Exception):
        collector.disable()


_SETS: dict[str, dict[str, list[str]]] = {}  # chip -> its single-pass sets and their metrics (read once)
_IMAGES: dict[tuple[str, tuple[str, ...]], Any] = {}  # (chip, metrics) -> the configuration image built for them


def _configure(collector: Any, chip: str, metrics: list[str], interval: int) -> None:
    """``collector.configure`` for ``metrics``, the configuration image built once per process: the binding builds
    it on the host each time (a profiler host for the chip, the metrics added, the image read back); the same chip
    and metrics give the same image. Where the binding's collector lacks the fields this reuses, its own path."""
    cc, _, _ = _cupti()
    image = _IMAGES.get((chip, tuple(metrics)))
    needed = ("_pm_sampling_object", "_config", "_metrics")
    if image is None or not all(hasattr(collector, f) for f in needed):
        collector.configure(metrics=metrics, hardware_buffer_size=BUFFER_BYTES, sampling_interval=interval)
        if getattr(collector, "_config", None) is not None:
            _IMAGES[(chip, tuple(metrics))] = collector._config
        return
    params = cc.PmSamplingSetConfigParams()
    params.struct_size = cc.PM_SAMPLING_SET_CONFIG_PARAMS_STRUCT_SIZE
    params.p_pm_sampling_object = collector._pm_sampling_object
    params.config_size = len(image)
    params.p_config = image.ctypes.data
    params.hardware_buffer_size = BUFFER_BYTES
    params.sampling_interval = interval
    params.trigger_mode = cc.PmSamplingTriggerMode.GPU_TIME_INTERVAL
    params.hw_buffer_append_mode = cc.PmSamplingHardwareBufferAppendMode.KEEP_OLDEST
    cc.pm_sampling_set_config(params.ptr)
    collector._metrics, collector._config = list(metrics), image


class Sampler:
    """PM sampling on one device, configured once for this run's metrics (``open``); ``round`` samples a stage."""

    def __init__(
        self, chip: str, sets: dict[str, list[str]], metrics: dict[str, str], refused: list[str], interval: int
    ) -> None:
        self.chip, self.sets, self.metrics, self.refused, self.interval = chip, sets, metrics, refused, interval
        self.collector: Any = None
        self.took: dict[str, float] = {}  # seconds: enabling, and opening in all (report.json: its cost)

    @classmethod
    def open(cls, device_index: int = 0, interval: int = INTERVAL_NS) -> Sampler | str:
        """A configured sampler, or why there is none (one line: not installed, no permission, no such chip)."""
        try:
            _, pm_sampling, profiler_host = _cupti()
        except ImportError as e:
            return f"cupti-python is not installed ({e.name or e}): README, Counters in event mode, says how"
        except Exception as e:  # the binding's own import failing (its libraries)
            return f"cupti-python could not load: {type(e).__name__}: {first_line(e)}"
        why = metric_libraries.claim()  # CUPTI's own libnvperf_host.so, never another release's (see that module)
        if why is not None:
            return why
        took: dict[str, float] = {}
        start = time.perf_counter()
        collector = pm_sampling.Collector(device_index)
        try:
            collector.enable()
            chip = str(collector._chip_name)
            took["enable_s"] = time.perf_counter() - start
            if chip not in _SETS:  # what the chip offers, read once per process
                names = profiler_host.get_single_pass_sets(chip)
                _SETS[chip] = {s: profiler_host.get_metrics_in_single_pass_set(chip, s) for s in names}
        except PermissionError:
            _disable(collector)
            return "PM sampling not permitted (ERR_NVGPUCTRPERM: the GPU's counters are open to admin users only)"
        except Exception as e:  # no such chip, another tool holding the counters (ncu, DCGM), a driver too old
            _disable(collector)
            return f"PM sampling unavailable on this GPU: {type(e).__name__}: {first_line(e)}"
        # a set's listing names raw counters (dramc__throughput), not every metric PM sampling accepts
        # (dram__throughput): what a configuration accepts decides; the first ones answer the Stages table, so a
        # refusal drops the last one, in a collector of its own (one collector configured twice broke its decode)
        metrics = dict(WANTED)
        refused: list[str] = []
        while True:
            try:
                _configure(collector, chip, list(metrics.values()), interval)
                break
            except Exception as e:  # ValueError for a refused set; the binding's cuptiError for a bad name
                _disable(collector)
                if len(metrics) == 1:
                    return f"PM sampling refused every metric on {chip} ({type(e).__name__}: {first_line(e)})"
                refused.append(metrics.popitem()[1])
                collector = pm_sampling.Collector(device_index)
                try:
                    collector.enable()
                except Exception as again:
                    return f"PM sampling unavailable on this GPU: {type(again).__name__}: {first_line(again)}"
        took["open_s"] = time.perf_counter() - start
        sampler = cls(chip, _SETS[chip], metrics, refused, interval)
        sampler.collector, sampler.took = collector, took
        return sampler

    def close(self) -> None:
        if self.collector is not None:
            _disable(self.collector)
            self.collector = None

    def describe(self) -> dict[str, Any]:
        """What the chip offered and what this run sampled (report.json keeps it)."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            binding = version("cupti-python")
        except PackageNotFoundError:  # importable without its metadata (copied in by hand)
            binding = "n/a"
        return {
            "version": binding,
            "chip": self.chip,
            "sets": sorted(self.sets),
            "metrics": self.metrics,
            "refused": self.refused,
            "interval_ns": self.interval,
            "seconds": {k: round(v, 3) for k, v in self.took.items()},
        }

    def round(
        self, fn: Callable[[], object], reps: int, flush: Callable[[], object] | None, flush_items: int
    ) -> dict[str, Any] | str:
        """The raw record of ``reps`` sampled repetitions of ``fn`` (see the module), or why there is none."""
        import torch

        cc, _, _ = _cupti()
        gap = int(GAP_SAMPLES * self.interval / 1000 * CYCLES_PER_US)
        anchors: list[list[int]] = []

        def anchor() -> None:
            before = time.time_ns()
            ts = int(cc.get_timestamp())
            after = time.time_ns()
            anchors.append([ts, (before + after) // 2, after - before])

        def body() -> None:
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

        try:
            began = time.perf_counter()
            result = in_session(body, kineto_session())
            session = time.perf_counter() - began
            # room for every sample of the sampled wall time, with a margin (the image grows with it)
            took_ns = anchors[-1][1] - anchors[0][1]
            data = self.collector.decode(max_samples=int(1.5 * took_ns / self.interval) + 200)
            # three decimals: % of peak to a thousandth, counts to the cycle (the file stays small)
            samples = [[s.start_timestamp, s.end_timestamp, [round(v, 3) for v in s.metric_values]] for s in data]
            decoded = time.perf_counter() - began - session
        except Exception as e:  # the profiler or CUPTI failing mid-round: this stage is not sampled
            with contextlib.suppress(Exception):
                self.collector.stop()
            return f"PM sampling failed: {type(e).__name__}: {first_line(e)}"
        items = gpu_events(result)
        return {
            "reps": reps,
            "seconds": {"session_s": round(session, 3), "decode_s": round(decoded, 3)},
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
        return f"PM sampling needs a CUDA device: {first_line(e)}"
    return Sampler.open(index, interval)
