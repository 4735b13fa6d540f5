"""The census of a stage's kernels from a PyTorch-profiler (Kineto) Chrome trace: which GPU items (kernels, memcpys,
memsets) each run of the stage put on the GPU, with the launch facts CUPTI recorded (grid, block, registers, shared
memory), the PyTorch op that launched each one, and the runtime/driver API calls each run made. Pure.

``facts`` turns a trace into the compact raw record event mode keeps in ``kernels.json`` (never the whole trace);
``stage_kernels`` turns that record into the shared model (kbench.analysis.kernels).

A run is a user annotation named ``MARK<i>`` around one call of the stage (capture/census.py puts them there); an API
call belongs to the run whose annotation spans it on the same thread, a GPU item to the run of the API call with its
correlation id. A trace with no such annotation is one run (a whole program's trace, as in the tests).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from kbench.analysis.kernels import HostTime, StageKernel, StageKernels, is_declared, shares

MARK = "kbench.census."
GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}  # Chrome-trace category -> kind
API_CATS = ("cuda_runtime", "cuda_driver")
TRITON = (
    "Triton launch"  # what launched a kernel with no PyTorch op around it, through the driver API (cuLaunchKernel*)
)


def _end(e: dict[str, Any]) -> float:
    return float(e["ts"]) + float(e.get("dur", 0.0))


def _runs(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    marks = [e for e in events if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(MARK)]
    return sorted(marks, key=lambda e: float(e["ts"]))


def _op_chains(ops: Sequence[dict[str, Any]]) -> dict[Any, str]:
    """Each op (by External id) as the caller wrote it: the outermost PyTorch op around it on its thread and, where
    they differ, itself: "aten::to > aten::copy_". One sweep per thread in start order (a stack of the open ops)."""
    out: dict[Any, str] = {}
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for o in ops:
        by_tid.setdefault(o.get("tid"), []).append(o)
    for thread in by_tid.values():
        open_: list[dict[str, Any]] = []
        for o in sorted(thread, key=lambda o: (float(o["ts"]), -_end(o))):
            while open_ and _end(open_[-1]) < _end(o):
                open_.pop()
            outer = open_[0] if open_ else o
            same = outer is o or outer["name"] == o["name"]
            ext = o.get("args", {}).get("External id")
            if ext is not None:
                out[ext] = str(o["name"]) if same else f"{outer['name']} > {o['name']}"
            open_.append(o)
    return out


def facts(trace: dict[str, Any]) -> dict[str, Any]:
    """The compact record of a census trace: ``runs``; ``items`` (one per distinct GPU item: kind, name, grid, block,
    registers, shared_bytes, op, api, and per run its launches and summed microseconds); ``api`` (call name -> calls
    per run) and ``api_us`` (-> microseconds per run); ``host_us`` (each run's annotation: the host's time in the
    stage, None without annotations); ``unplaced`` (GPU items no run's API call launched)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    marks = _runs(events)
    n = max(1, len(marks))
    chains = _op_chains([e for e in events if e.get("cat") == "cpu_op"])

    def run_of(call: dict[str, Any]) -> int | None:
        if not marks:
            return 0
        return next(
            (i for i, m in enumerate(marks) if m.get("tid") == call.get("tid") and m["ts"] <= call["ts"] <= _end(m)),
            None,
        )

    api: dict[str, list[float]] = {}
    api_us: dict[str, list[float]] = {}
    calls: dict[Any, tuple[int, str]] = {}  # correlation id -> (run, API name)
    for e in events:
        if e.get("cat") not in API_CATS or (run := run_of(e)) is None:
            continue
        name = str(e["name"])
        api.setdefault(name, [0.0] * n)[run] += 1
        api_us.setdefault(name, [0.0] * n)[run] += float(e.get("dur", 0.0))
        calls[e.get("args", {}).get("correlation")] = (run, name)

    items: dict[tuple[Any, ...], dict[str, Any]] = {}
    unplaced = 0
    for e in events:
        kind = GPU_KINDS.get(str(e.get("cat")))
        if kind is None:
            continue
        a = e.get("args", {})
        placed = calls.get(a.get("correlation"))
        if placed is None:
            unplaced += 1
            continue
        run, launcher = placed
        who = chains.get(a.get("External id")) or (TRITON if launcher.startswith("cuLaunch") else None)
        key = (kind, e["name"], str(a.get("grid")), str(a.get("block")), a.get("registers per thread"), who)
        item = items.setdefault(
            key,
            {
                "kind": kind,
                "name": str(e["name"]),
                "grid": a.get("grid"),
                "block": a.get("block"),
                "registers": a.get("registers per thread"),
                "shared_bytes": a.get("shared memory"),
                "bytes": a.get("bytes"),
                "op": who,
                "api": launcher,
                "launches": [0] * n,
                "us": [0.0] * n,
            },
        )
        item["launches"][run] += 1
        item["us"][run] += float(e.get("dur", 0.0))
    return {
        "runs": n,
        "items": sorted(items.values(), key=lambda i: -sum(i["us"])),
        "api": api,
        "api_us": {k: [round(v, 3) for v in vs] for k, vs in api_us.items()},
        "host_us": [float(m.get("dur", 0.0)) for m in marks] or None,
        "unplaced": unplaced,
    }


def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else 0.0


def stage_kernels(
    name: str,
    record: dict[str, Any],
    declared: Sequence[str] = (),
    events_us: Sequence[float] | None = None,
    cupti_us: Sequence[float] | None = None,
) -> StageKernels:
    """A stage's census record as the shared model: each GPU item by name (its variants' launches and times summed;
    the launch facts of the variant that took the most time), per run the median over the census's runs, its share
    and whether the plan declares it; and, given the stage's CUDA-event and CUPTI samples, its host time."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for item in record.get("items", []):
        by_name.setdefault(item["name"], []).append(item)
    kernels = []
    for kname, variants in by_name.items():
        top = max(variants, key=lambda v: sum(v["us"]))
        runs = len(top["launches"])
        launches = [sum(v["launches"][r] for v in variants) for r in range(runs)]
        us = [sum(v["us"][r] for v in variants) for r in range(runs)]
        kernels.append(
            StageKernel(
                name=kname,
                launches=_median(launches),
                us=_median(us),
                grid=top.get("grid"),
                block=top.get("block"),
                registers=top.get("registers"),
                shared_bytes=top.get("shared_bytes"),
                declared=is_declared(kname, declared) if top["kind"] == "kernel" else (False if declared else None),
                op=top.get("op"),
                source="CUPTI",
            )
        )
    host = None
    if events_us and cupti_us:
        api = {k: _median(v) for k, v in record.get("api", {}).items()}
        span = record.get("host_us")
        host = HostTime(
            events_us=_median(events_us), kernels_us=_median(cupti_us), api=api, span_us=_median(span) if span else None
        )
    return StageKernels(stage=name, kernels=shares(kernels), host=host)
