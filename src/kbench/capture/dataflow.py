"""What a stage reads and writes, seen at its first launch on the GPU (the data flow the fusion diagnosis needs).

The launch runs once, before any timing, with every Triton launch (``JITFunction.run``) and every PyTorch
operator (a dispatch mode: library calls such as torch.mm included) watched. The tensors they receive are matched
to the workspace's tensors by storage; a workspace tensor whose bytes changed (a checksum before and after) or that
an operator declares it mutates was written, the others it received were read. A stage can declare its reads and
writes instead (``Stage.reads`` / ``Stage.writes``: workspace names), for calls kbench cannot watch.

The record (``tiling/<stage>.json`` ``dataflow``): how many kernels the stage launched, and per workspace tensor
it touched its name, its bytes and whether it was read and/or written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

log = logging.getLogger(__name__)


def workspace_tensors(ws: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """The workspace's tensors by name: dict keys, list indices and attributes, two levels deep."""
    import torch

    if isinstance(ws, torch.Tensor):
        return {prefix or "workspace": ws}
    if depth > 2:
        return {}
    items: list[tuple[str, Any]] = []
    if isinstance(ws, dict):
        items = [(str(k), v) for k, v in ws.items()]
    elif isinstance(ws, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(ws)]
    elif hasattr(ws, "__dict__"):
        items = [(k, v) for k, v in vars(ws).items() if not k.startswith("_")]
    found: dict[str, Any] = {}
    for key, value in items:
        found.update(workspace_tensors(value, f"{prefix}.{key}" if prefix else key, depth + 1))
    return found


def _storage(t: Any) -> int:
    return int(t.untyped_storage().data_ptr())


CHUNK = 1 << 26  # bytes summed at a time: the int64 sum casts its input, so 8x this in temporary memory


def _checksum(t: Any) -> tuple[int, int]:
    """Two sums over the tensor's bytes (plain, and of every 7th byte of each chunk): a write changes them."""
    import torch

    flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
    total = strided = 0
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start : start + CHUNK]
        total += int(part.sum(dtype=torch.int64))
        strided += int(part[::7].sum(dtype=torch.int64))
    return total, strided


class _Seen:
    def __init__(self) -> None:
        self.kernels = 0
        self.tensors: dict[int, int] = {}  # storage -> bytes of the views received (summed)
        self.mutated: set[int] = set()
        self.compiled: list[Any] = []  # the Triton kernels launched, in order
        self.grids: list[list[int] | None] = []  # the grid each of them was launched with (None: not told)

    def tensor(self, t: Any, written: bool = False) -> None:
        s = _storage(t)
        self.tensors[s] = self.tensors.get(s, 0) + t.numel() * t.element_size()
        if written:
            self.mutated.add(s)


def _dims(grid: Any) -> list[int] | None:
    """A launch grid as (x, y, z) whole numbers; None when it is not one."""
    try:
        dims = [int(g) for g in grid]
    except (TypeError, ValueError):
        return None
    return [*dims, 1, 1][:3] if 1 <= len(dims) <= 3 else None


def _told(grid: Any, ran: list[list[int]]) -> Any:
    """The grid Triton launches with, recording into ``ran`` the one it evaluates (a callable grid is evaluated on
    the kernel's bound arguments inside ``JITFunction.run``)."""
    if not callable(grid):
        if (dims := _dims(grid)) is not None:
            ran.append(dims)
        return grid

    def evaluated(meta: Any) -> Any:
        value = grid(meta)
        if (dims := _dims(value)) is not None:
            ran.append(dims)
        return value

    return evaluated


@contextmanager
def watching(ops: bool = True) -> Iterator[_Seen]:
    """Watch Triton launches and (``ops``) PyTorch operators (views excepted: they launch nothing) while the block
    runs."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = _Seen()

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if not getattr(func, "is_view", False):
                seen.kernels += 1
                for i, a in enumerate(func._schema.arguments):
                    value = kwargs.get(a.name) if a.kwarg_only or i >= len(args) else args[i]
                    if isinstance(value, torch.Tensor):
                        seen.tensor(value, written=bool(a.alias_info and a.alias_info.is_write))
            return func(*args, **kwargs)

    patched: list[tuple[Any, Any]] = []
    try:
        from triton.runtime.jit import JITFunction

        original = JITFunction.run

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if not warmup:
                seen.kernels += 1
                for a in [*args, *kwargs.values()]:
                    if isinstance(a, torch.Tensor):
                        seen.tensor(a)
            ran: list[list[int]] = []
            kernel = original(self, *args, grid=_told(grid, ran), warmup=warmup, **kwargs)
            if not warmup and hasattr(kernel, "asm"):
                seen.compiled.append(kernel)
                seen.grids.append(ran[-1] if ran else None)
            return kernel

        JITFunction.run = run
        patched.append((JITFunction, original))
    except ImportError:  # no Triton: library calls only
        pass
    try:
        with Ops() if ops else nullcontext():  # type: ignore[no-untyped-call]
            yield seen
    finally:
        for cls, original in patched:
            cls.run = original


def record(launch: Callable[[], Any], ws: Any, output: Any = None) -> tuple[Any, dict[str, Any]]:
    """Run ``launch`` once, watched: its return value and its data-flow record."""
    named = workspace_tensors(ws)
    by_storage: dict[int, tuple[str, Any]] = {}
    for name, t in named.items():
        by_storage.setdefault(_storage(t), (name, t))
    before = {s: _checksum(t) for s, (_, t) in by_storage.items() if t.numel()}
    with watching() as seen:
        result = launch()
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    tensors = []
    for s, received in seen.tensors.items():
        if s not in by_storage:
            continue  # a temporary of the stage's own
        name, t = by_storage[s]
        written = s in seen.mutated or (s in before and _checksum(t) != before[s])
        size = t.untyped_storage().nbytes()
        tensors.append({"name": name, "bytes": min(received, size), "read": not written, "written": written})
    out_storage = _storage(output) if output is not None else None
    for entry in tensors:
        entry["output"] = out_storage is not None and by_storage.get(out_storage, ("",))[0] == entry["name"]
    return result, {"source": "launch arguments", "kernels": seen.kernels, "tensors": tensors}


def declared(reads: Any, writes: Any, ws: Any, output: Any = None) -> dict[str, Any]:
    """The record from a stage's declared reads and writes (workspace names); unknown names are the plan's error."""
    from kbench.errors import UsageError

    named = workspace_tensors(ws)
    unknown = [n for n in [*reads, *writes] if n not in named]
    if unknown:
        raise UsageError(
            f"stage declares reads/writes of {', '.join(unknown)}, not tensors of its workspace "
            f"(known: {', '.join(named) or 'none'})"
        )
    out_storage = _storage(output) if output is not None else None
    return {
        "source": "declared",
        "kernels": None,
        "tensors": [
            {
                "name": n,
                "bytes": named[n].numel() * named[n].element_size(),
                "read": n in reads,
                "written": n in writes,
                "output": out_storage is not None and _storage(named[n]) == out_storage,
            }
            for n in dict.fromkeys([*reads, *writes])
        ],
    }
