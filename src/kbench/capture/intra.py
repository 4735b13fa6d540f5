"""The host side of the intra-kernel task timeline: the profiler buffer a kernel records into (``kbench.plan.intra``
writes it), reading it back, and its export as a Chrome trace that ui.perfetto.dev opens.

The interface of triton-distributed's intra-kernel profiler (from FlashInfer's):

    with ProfilerBuffer(max_num_profile_slots=1 << 20, trace_file="mm", task_names=["load", "mma", "store"]) as buf:
        kernel[grid](..., buf, PROFILE=True)

or ``alloc_profiler_buffer``, ``reset_profiler_buffer``, ``export_to_perfetto_trace``; ``set_export_trace_off`` keeps
``ProfilerBuffer`` from writing a trace on exit (on by default). ``max_num_profile_slots`` must exceed the records
of all CTAs together plus one slot per CTA; a CTA that records more than its share is reported with the count it
lost, never cut silently.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kbench.analysis import intra
from kbench.fsutil import write_text_atomic
from kbench.intra_layout import HEADER, MAGIC

DEFAULT_SLOTS = 1 << 20  # 8 MiB of int64


def _timer() -> str:
    from kbench.plan.intra import INTERPRETED

    if INTERPRETED:
        return "the host's time.perf_counter_ns (Triton's interpreter: no GPU timer, every CTA on SM 0)"
    return "%globaltimer (one clock for every SM), low 47 bits of nanoseconds"


_export = {"on": True}


def set_export_trace_on() -> None:
    _export["on"] = True


def set_export_trace_off() -> None:
    _export["on"] = False


def alloc_profiler_buffer(max_num_profile_slots: int = DEFAULT_SLOTS, device: Any = "cuda") -> Any:
    """An int64 tensor of ``HEADER`` + ``max_num_profile_slots`` words on ``device``, reset."""
    import torch

    if max_num_profile_slots < 2:
        raise ValueError(f"max_num_profile_slots={max_num_profile_slots}: at least 2 (a CTA's count and a record)")
    buf = torch.zeros(HEADER + max_num_profile_slots, dtype=torch.int64, device=device)
    reset_profiler_buffer(buf)
    return buf


def reset_profiler_buffer(profiler_buffer: Any) -> None:
    """Forget every record (the header keeps its magic word and capacity)."""
    profiler_buffer.zero_()
    profiler_buffer[0] = MAGIC
    profiler_buffer[1] = profiler_buffer.numel() - HEADER


def read(profiler_buffer: Any, task_names: Sequence[str]) -> intra.Decoded:
    """The buffer's records, after the GPU finished writing them."""
    import torch

    if profiler_buffer.is_cuda:
        torch.cuda.synchronize(profiler_buffer.device)
    head = profiler_buffer[:HEADER].tolist()
    used = HEADER + (head[1] // head[2]) * head[2] if head[2] > 0 else HEADER  # only the CTAs' regions
    return intra.decode(head + profiler_buffer[HEADER:used].tolist(), task_names)


def trace(decoded: intra.Decoded, kernel: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Chrome trace of decoded records, with what the buffer lost in ``otherData``."""
    info = {
        "kernel": kernel,
        "ctas": decoded.ctas,
        "recorded_ctas": decoded.recorded_ctas,
        "slots_per_cta": decoded.slots_per_cta,
        "dropped_records": decoded.dropped,
        "overflowed_ctas": decoded.overflowed_ctas,
        "unpaired_records": decoded.unpaired,
        "timer_step_ns": decoded.step_ns,
        "timer": _timer(),
        **(meta or {}),
    }
    return intra.chrome_trace(decoded.records, kernel, info)


def export_to_perfetto_trace(
    profiler_buffer: Any, task_names: Sequence[str], file_name: str | Path, kernel: str = "kernel"
) -> Path:
    """Write the buffer's records as a Chrome trace (``<file_name>.json`` unless it ends in .json) and return its
    path; open it in ui.perfetto.dev. Overflow and unpaired records are in the trace's ``otherData``."""
    path = Path(file_name)
    if path.suffix != ".json":
        path = path.with_name(path.name + ".json")
    write_text_atomic(path, json.dumps(trace(read(profiler_buffer, task_names), kernel)))
    return path


class ProfilerBuffer:
    """A reset profiler buffer for the launches inside the ``with``; on a clean exit the trace goes to
    ``trace_file`` (unless ``set_export_trace_off``)."""

    def __init__(
        self,
        max_num_profile_slots: int = DEFAULT_SLOTS,
        trace_file: str | Path = "trace",
        task_names: Sequence[str] = (),
        kernel: str = "kernel",
        device: Any = "cuda",
    ) -> None:
        self.slots, self.trace_file, self.task_names = max_num_profile_slots, trace_file, list(task_names)
        self.kernel, self.device = kernel, device
        self.buffer: Any = None
        self.written: Path | None = None

    def __enter__(self) -> Any:
        self.buffer = alloc_profiler_buffer(self.slots, self.device)
        return self.buffer

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        if kind is None and _export["on"]:
            self.written = export_to_perfetto_trace(self.buffer, self.task_names, self.trace_file, self.kernel)


def measure(prep: Any, reps: int, run_dir: Path, progress: Any, rest_x: float) -> dict[str, Any]:
    """Each stage timed plain (CUDA events, the L2 flushed before each repetition); a stage that records tasks is
    timed plain and recording in turn within each repetition (both meet the same clock states), then recorded once
    more after a flush: those records are kept as ``intra-<stage>.json`` (a Chrome trace). A buffer that overflowed
    is reported and the launch recorded again with room for every record. ``rest_x``: the GPU rests that many
    times a repetition's duration before each (unlocked clocks). Returns what ``intra.json`` holds."""
    import torch

    from kbench.capture.prepare import built, guarded
    from kbench.capture.timing import L2Flush, l2_flush_bytes, time_interleaved

    flush = L2Flush(l2_flush_bytes())  # one buffer for every timing and the recorded launch
    stages: dict[str, Any] = {}
    for ps in prep.stages:
        stage = ps.stage
        entry: dict[str, Any] = {"tasks": list(stage.tasks)}
        stages[stage.name] = entry
        if stage.build_intra is None:
            [plain] = guarded(stage.name, partial(time_interleaved, [ps.launch.fn], reps, rest_x=rest_x, scratch=flush))
            entry.update(plain_us=plain.us, method=plain.method)
            continue
        progress(f"{stage.name}: timing it plain and recording its tasks ({', '.join(stage.tasks)}) in turn")
        output = prep.plan.output(prep.ws)
        expected = output.clone() if isinstance(output, torch.Tensor) else None
        slots = DEFAULT_SLOTS
        buf = alloc_profiler_buffer(slots)
        launch = built(prep.plan, stage, prep.ws, ps.config, buf)
        plain, recording = guarded(
            stage.name, partial(time_interleaved, [ps.launch.fn, launch.fn], reps, rest_x=rest_x, scratch=flush)
        )
        entry.update(
            plain_us=plain.us, instrumented_us=recording.us, method=f"{plain.method}, plain and recording in turn"
        )
        decoded, overflows = None, []
        for _ in range(2):
            reset_profiler_buffer(buf)
            flush()
            guarded(stage.name, launch.fn)
            decoded = read(buf, stage.tasks)
            if not decoded.dropped:
                break
            overflows.append({"slots": slots, "dropped_records": decoded.dropped, "ctas": decoded.overflowed_ctas})
            slots = decoded.ctas * (decoded.most_records + 1)
            buf = alloc_profiler_buffer(slots)
            launch = built(prep.plan, stage, prep.ws, ps.config, buf)
        assert decoded is not None
        name = f"intra-{stage.name}.json"
        meta = {"stage": stage.name, "overflows": overflows}
        write_text_atomic(run_dir / name, json.dumps(trace(decoded, _kernel_name(ps), meta)))
        entry.update(trace=name, slots=slots, overflows=overflows)
        if expected is not None:
            entry["same_output"] = bool(torch.equal(expected, prep.plan.output(prep.ws)))
    return {"reps": reps, "flush": flush.words, "rest_x": rest_x, "stages": stages}


def _kernel_name(ps: Any) -> str:
    compiled = getattr(ps, "compiled", None)
    name = getattr(getattr(compiled, "metadata", None), "name", None) or (ps.stage.kernels or [ps.stage.name])[0]
    return str(name)
