"""What CUPTI PM sampling gives on this GPU, in-process beside torch (issue 43's first device call).

Writes OUT/probe.json: the chip's single-pass sets and their metrics; which wanted metrics configure together; a
sampled run inside a PyTorch-profiler (Kineto) session (a 1 GiB copy, a bf16 GEMM, host sleeps between, kernels
that write the GPU's %globaltimer) with every clock read beside it, so the samples' time domain can be placed
against the kernel records'; the costs (import, enable, configure, start/stop, decode); the GEMM's CUDA-event time
with sampling on and off; and whether enable/disable/enable and a later Kineto session still work.

    python3 scripts/pm-sampling-probe.py OUT [--ncu]   (--ncu: also run the workload once under ncu, metrics as CSV)
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

WANT = [
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__inst_executed_pipe_xu_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__cycles_active.max",
    "sm__cycles_active.avg",
    "gr__cycles_elapsed.max",
]
EXTRA = [  # tried one at a time on top of WANT
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_fma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_alu_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__inst_executed_pipe_lsu_realtime.avg.pct_of_peak_sustained_elapsed",
    "pcie__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__cycles_active_realtime.max",
    "sm__cycles_active_realtime.avg",
]

STAMP_SRC = r"""
extern "C" __global__ void stamp(unsigned long long* out, int i) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    out[i] = t;
}
"""


def clocks() -> dict[str, int]:
    import cupti.cupti as cc

    return {
        "cupti_ns": int(cc.get_timestamp()),
        "monotonic_ns": time.monotonic_ns(),
        "time_ns": time.time_ns(),
        "perf_counter_ns": time.perf_counter_ns(),
    }


def workload() -> None:
    """The probe's kernels alone, for ncu: the copy twice, the GEMM three times."""
    import torch

    x = torch.empty(1 << 29, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    for _ in range(2):
        y.copy_(x)
    for _ in range(3):
        torch.mm(a, b)
    torch.cuda.synchronize()


def main() -> None:
    if sys.argv[1] == "--workload":
        return workload()
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rec: dict[str, Any] = {}
    t = time.perf_counter()
    import torch

    rec["torch"] = torch.__version__
    torch.cuda.init()
    x = torch.empty(1 << 29, dtype=torch.float16, device="cuda")  # 1 GiB
    y = torch.empty_like(x)
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    torch.mm(a, b)
    y.copy_(x)
    torch.cuda.synchronize()
    rec["torch_init_s"] = time.perf_counter() - t
    t = time.perf_counter()
    import cupti
    import cupti.cupti as cc
    from cupti import pm_sampling, profiler_host

    rec["import_cupti_s"] = time.perf_counter() - t
    rec["cupti_python"] = getattr(cupti, "__version__", "?")
    try:
        import cupy as cp

        stamp = cp.RawKernel(STAMP_SRC, "stamp")
        stamps = cp.zeros(16, dtype=cp.uint64)
    except Exception as e:
        rec["stamp_error"] = repr(e)
        stamp = None

    def put_stamp(i: int) -> None:
        if stamp is not None:
            stamp((1,), (1,), (stamps, cp.int32(i)))

    col = pm_sampling.Collector(0)
    t = time.perf_counter()
    col.enable()
    rec["enable_s"] = time.perf_counter() - t
    chip = col._chip_name
    rec["chip"] = chip
    sets = profiler_host.get_single_pass_sets(chip)
    rec["single_pass_sets"] = {s: profiler_host.get_metrics_in_single_pass_set(chip, s) for s in sets}
    rec["supported_chips"] = profiler_host.get_supported_chips()

    col.disable()  # one configuration per enabled collector: configure() again on the same one broke decode

    def try_config(metrics: list[str], **kw: Any) -> str | None:
        c = pm_sampling.Collector(0)
        c.enable()
        try:
            c.configure(metrics=metrics, hardware_buffer_size=512 << 20, sampling_interval=20_000, **kw)
            return None
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        finally:
            c.disable()

    t = time.perf_counter()
    rec["want_config"] = try_config(WANT)
    rec["configure_s"] = time.perf_counter() - t
    accepted = list(WANT) if rec["want_config"] is None else []
    if not accepted:
        for m in WANT:
            if try_config([*accepted, m]) is None:
                accepted.append(m)
    rec["extra"] = {m: try_config([*accepted, m]) for m in EXTRA}
    full = [*accepted, *[m for m, err in rec["extra"].items() if err is None]]
    full_err = try_config(full)
    rec["full_config"] = full_err
    metrics = full if full_err is None else accepted
    rec["metrics"] = metrics

    # the sampled run, alone and inside a Kineto session, with the seven metrics and with all accepted
    from torch._C._autograd import DeviceType, _disable_profiler, _enable_profiler, _prepare_profiler
    from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, _ExperimentalConfig

    config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
    acts = {ProfilerActivity.CUDA}

    def save() -> None:
        (out / "probe.json").write_text(json.dumps(rec))

    def sampled(tag: str, ms: list[str], kineto: bool, buffer: int, max_samples: int) -> None:
        r: dict[str, Any] = {"metrics": ms, "kineto": kineto, "buffer": buffer, "max_samples": max_samples}
        rec.setdefault("runs", {})[tag] = r
        col = pm_sampling.Collector(0)
        try:
            t = time.perf_counter()
            col.enable()
            col.configure(metrics=ms, hardware_buffer_size=buffer, sampling_interval=20_000)
            r["enable_configure_s"] = time.perf_counter() - t
            if kineto:
                _prepare_profiler(config, acts)
                _enable_profiler(config, acts)
            r["clocks_before"] = clocks()
            t = time.perf_counter()
            col.start()
            r["start_s"] = time.perf_counter() - t
            r["clocks_in"] = clocks()
            time.sleep(0.002)
            put_stamp(0)
            for _ in range(2):
                y.copy_(x)
            put_stamp(1)
            torch.cuda.synchronize()
            time.sleep(0.002)
            put_stamp(2)
            for _ in range(3):
                torch.mm(a, b)
            put_stamp(3)
            torch.cuda.synchronize()
            time.sleep(0.002)
            put_stamp(4)
            torch.cuda._sleep(200_000)  # one thread, ~100 us
            put_stamp(5)
            torch.cuda.synchronize()
            r["clocks_end"] = clocks()
            t = time.perf_counter()
            col.stop()
            r["stop_s"] = time.perf_counter() - t
            if kineto:
                result = _disable_profiler()
                r["kineto_events"] = [
                    {"name": e.name(), "start_ns": e.start_ns(), "dur_ns": e.duration_ns()}
                    for e in result.events()
                    if e.device_type() == DeviceType.CUDA
                ]
                result.save(str(out / f"kineto-{tag}.json"))
            if stamp is not None:
                r["stamps"] = [int(v) for v in stamps.get()]
            t = time.perf_counter()
            data = col.decode(max_samples=max_samples)
            r["decode_s"] = time.perf_counter() - t
            t = time.perf_counter()
            r["samples"] = [(s.start_timestamp, s.end_timestamp, list(s.metric_values)) for s in data]
            r["evaluate_s"] = time.perf_counter() - t
            r["decode"] = {
                "total": data.num_total_samples,
                "populated": data.num_populated_samples,
                "completed": data.num_completed_samples,
                "metrics": list(data.metrics),
            }
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {e}"
            try:
                col.stop()
            except Exception as e2:
                r["stop_error"] = repr(e2)
        finally:
            col.disable()
        print(tag, {k: v for k, v in r.items() if k not in ("samples", "kineto_events", "metrics")}, flush=True)
        print(tag, "samples", len(r.get("samples", [])), flush=True)
        save()

    # the seven the first session sampled together: WANT's first six and the PCIe throughput
    seven = [*WANT[:6], "pcie__throughput.avg.pct_of_peak_sustained_elapsed"]
    save()
    sampled("seven_alone", seven, False, 512 << 20, 10_000)
    sampled("seven_kineto", seven, True, 512 << 20, 10_000)
    sampled("all_kineto", metrics, True, 512 << 20, 10_000)
    sampled("all_kineto_small", metrics, True, 64 << 20, 10_000)
    col = pm_sampling.Collector(0)
    col.enable()
    col.configure(metrics=seven, hardware_buffer_size=512 << 20, sampling_interval=20_000)

    # interference: the GEMM's CUDA-event time, sampling off / on, alternating blocks
    def timed(n: int = 20) -> list[float]:
        ts = []
        for _ in range(n):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.mm(a, b)
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) * 1e3)
        return ts

    off: list[float] = []
    on: list[float] = []
    copy_off: list[float] = []
    copy_on: list[float] = []

    def timed_copy(n: int = 20) -> list[float]:
        ts = []
        for _ in range(n):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            y.copy_(x)
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) * 1e3)
        return ts

    for _ in range(4 if "error" not in rec["runs"]["seven_alone"] else 0):
        off += timed()
        copy_off += timed_copy()
        col.start()
        on += timed()
        copy_on += timed_copy()
        col.stop()
        col.decode(max_samples=10_000)
    if on:
        rec["gemm_us"] = {"off": statistics.median(off), "on": statistics.median(on)}
        rec["copy_us"] = {"off": statistics.median(copy_off), "on": statistics.median(copy_on)}
    # teardown and again (the resident runs event mode many times in one process)
    t = time.perf_counter()
    col.disable()
    rec["disable_s"] = time.perf_counter() - t
    col2 = pm_sampling.Collector(0)
    t = time.perf_counter()
    try:
        col2.enable()
        col2.configure(metrics=seven, hardware_buffer_size=512 << 20, sampling_interval=20_000)
        col2.start()
        torch.mm(a, b)
        torch.cuda.synchronize()
        col2.stop()
        rec["again_samples"] = len(col2.decode())
        col2.disable()
        rec["again_s"] = time.perf_counter() - t
    except Exception as e:
        rec["again_error"] = f"{type(e).__name__}: {e}"
    _prepare_profiler(config, acts)
    _enable_profiler(config, acts)
    torch.mm(a, b)
    torch.cuda.synchronize()
    after = _disable_profiler()
    rec["kineto_after"] = sum(1 for e in after.events() if e.device_type() == DeviceType.CUDA)
    # a buffer overflow: how decode says it
    col3 = pm_sampling.Collector(0)
    try:
        col3.enable()
        col3.configure(metrics=seven, hardware_buffer_size=1 << 16, sampling_interval=1_000)
        col3.start()
        for _ in range(3):
            torch.mm(a, b)
        torch.cuda.synchronize()
        col3.stop()
        d = col3.decode(max_samples=100)
        rec["small_buffer"] = {"completed": d.num_completed_samples, "total": d.num_total_samples}
    except Exception as e:
        rec["small_buffer_error"] = f"{type(e).__name__}: {e}"
    finally:
        col3.disable()
    save()
    rec["libs"] = sorted(
        {ln.split()[-1] for ln in Path("/proc/self/maps").read_text().splitlines() if "cupti" in ln or "nvperf" in ln}
    )
    rec["cc_names"] = [n for n in dir(cc) if "timestamp" in n.lower()]
    (out / "probe.json").write_text(json.dumps(rec))
    print(
        json.dumps(
            {k: v for k, v in rec.items() if k not in ("runs", "single_pass_sets", "supported_chips")},
            indent=1,
        )
    )
    print(
        "sets:",
        {k: len(v) for k, v in rec["single_pass_sets"].items()},
        "runs:",
        {k: len(v.get("samples", [])) for k, v in rec.get("runs", {}).items()},
    )


if __name__ == "__main__":
    main()
