"""What a stage reads and writes, seen at its first launch on the GPU (the data flow the fusion diagnosis needs).

The launch runs once, before any timing, with every Triton launch (``JITFunction.run``) and every PyTorch
operator (a dispatch mode: library calls such as torch.mm included) watched. The tensors they receive are matched
to the workspace's tensors by storage; a workspace tensor whose bytes changed (a checksum before and after) or that
an operator declares it mutates was written, the others it received were read. A stage can declare its reads and
writes instead (``Stage.reads`` / ``Stage.writes``: workspace names), for calls kbench cannot watch.

The record (``tiling/<stage>.json`` ``dataflow``): how many kernels the stage launched, and per workspace tensor
it touched its name, its bytes and whether it was read and/or written. And, launch by launch (``launches``: its
first MAX_LAUNCHES, ``launches_cut`` counts the rest), the kernel (a Triton kernel's name, a PyTorch operator's) and
the tensors it read and wrote with the bytes it received: workspace tensors by name, tensors the stage allocated
itself as "temporary N" in the order first seen. A Triton launch wrote a tensor whose bytes changed across it (each
tensor it receives is checksummed before and after, hence the bound); an operator wrote what its schema mutates and
what it returns. What two launches of one stage pass through memory is read from it
(kbench.analysis.catalogue.exchange).
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


MAX_LAUNCHES = 32  # launches recorded one by one (a Triton launch checksums its tensors twice); the rest summed
NO_KERNEL = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided")


def _bytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


class _Launch:
    """One launch: its kernel, and per storage the bytes of the views it read and wrote (summed)."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.reads: dict[int, int] = {}
        self.writes: dict[int, int] = {}

    def add(self, t: Any, written: bool) -> None:
        into = self.writes if written else self.reads
        into[_storage(t)] = into.get(_storage(t), 0) + _bytes(t)


class _Seen:
    def __init__(self, each: bool = False) -> None:
        self.kernels = 0
        self.tensors: dict[int, int] = {}  # storage -> bytes of the views received (summed)
        self.mutated: set[int] = set()
        self.compiled: list[Any] = []  # the Triton kernels launched, in order
        self.grids: list[list[int] | None] = []  # the grid each of them was launched with (None: not told)
        self.each = each  # record launches one by one
        self.launches: list[_Launch] = []
        self.cut = 0  # launches past MAX_LAUNCHES, not recorded one by one
        self.sizes: dict[int, int] = {}  # storage -> its bytes
        self.quiet = False  # the recorder's own checksums run: not the stage's operators

    def tensor(self, t: Any, written: bool = False) -> None:
        s = _storage(t)
        self.tensors[s] = self.tensors.get(s, 0) + _bytes(t)
        self.sizes[s] = int(t.untyped_storage().nbytes())
        if written:
            self.mutated.add(s)

    def one_by_one(self) -> bool:
        """Whether the launch about to run is recorded one by one (counts it past the bound otherwise)."""
        if not self.each:
            return False
        if len(self.launches) < MAX_LAUNCHES:
            return True
        self.cut += 1
        return False

    @contextmanager
    def quieted(self) -> Iterator[None]:
        was, self.quiet = self.quiet, True
        try:
            yield
        finally:
            self.quiet = was

    def sums(self, tensors: list[Any]) -> list[tuple[int, int]]:
        with self.quieted():
            return [_checksum(t) for t in tensors]


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


def _triton_classes() -> list[Any]:
    """The classes whose ``run`` launches a Triton kernel: compiled, and under TRITON_INTERPRET=1 interpreted."""
    found = []
    try:
        from triton.runtime.jit import JITFunction

        found.append(JITFunction)
        from triton.runtime.interpreter import InterpretedFunction

        found.append(InterpretedFunction)
    except ImportError:  # no Triton (library calls only), or no interpreter in this version
        pass
    return found


def launch_tensors(values: list[Any]) -> list[Any]:
    """The tensors a launch is given, once each: its tensor arguments and the tensors behind its tensor descriptors
    (a TMA descriptor, Triton's or Gluon's, holds its tensor in ``base``: a kernel fed only descriptors reads its
    inputs through them)."""
    import torch

    out: dict[int, Any] = {}
    for a in values:
        t = a if isinstance(a, torch.Tensor) else getattr(a, "base", None) if hasattr(a, "block_shape") else None
        if isinstance(t, torch.Tensor):
            out.setdefault(id(t), t)
    return list(out.values())


def _watched_run(cls: Any, seen: _Seen) -> Any:
    """``cls.run`` watched: the tensors each launch receives, and (one by one) which of them it changed."""

    original = cls.run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        tensors = launch_tensors([*args, *kwargs.values()]) if not warmup else []
        if not warmup:
            seen.kernels += 1
            for a in tensors:
                seen.tensor(a)
        before = seen.sums(tensors) if not warmup and seen.one_by_one() else None
        ran: list[list[int]] = []
        with seen.quieted():  # operators the launcher runs (the interpreter's copies) are not the stage's
            kernel = original(self, *args, grid=_told(grid, ran), warmup=warmup, **kwargs)
        if before is not None:
            one = _Launch(str(getattr(getattr(self, "fn", None), "__name__", None) or type(self).__name__))
            for t, was, now in zip(tensors, before, seen.sums(tensors), strict=True):
                one.add(t, written=now != was)
            seen.launches.append(one)
        if not warmup and hasattr(kernel, "asm"):
            seen.compiled.append(kernel)
            seen.grids.append(ran[-1] if ran else None)
        return kernel

    return original, run


@contextmanager
def watching(ops: bool = True, each: bool = False) -> Iterator[_Seen]:
    """Watch Triton launches and (``ops``) PyTorch operators (views excepted: they launch nothing) while the block
    runs; ``each``: record launches one by one (``_Seen.launches``)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    seen = _Seen(each)

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if seen.quiet or getattr(func, "is_view", False):
                return func(*args, **kwargs)
            seen.kernels += 1
            name = str(func._schema.name)
            one = _Launch(name) if name not in NO_KERNEL and seen.one_by_one() else None
            for i, a in enumerate(func._schema.arguments):
                value = kwargs.get(a.name) if a.kwarg_only or i >= len(args) else args[i]
                if isinstance(value, torch.Tensor):
                    written = bool(a.alias_info and a.alias_info.is_write)
                    seen.tensor(value, written=written)
                    if one is not None:
                        one.add(value, written)
            result = func(*args, **kwargs)
            if one is not None:
                for t in tree_leaves(result):
                    if isinstance(t, torch.Tensor) and _storage(t) not in one.writes:
                        seen.sizes[_storage(t)] = int(t.untyped_storage().nbytes())
                        one.add(t, written=True)
                seen.launches.append(one)
            return result

    patched: list[tuple[Any, Any]] = []
    for cls in _triton_classes():
        original, run = _watched_run(cls, seen)
        cls.run = run
        patched.append((cls, original))
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
    with watching(each=True) as seen:
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
    flow: dict[str, Any] = {"source": "launch arguments", "kernels": seen.kernels, "tensors": tensors}
    flow["launches"] = _launches(seen, {s: name for s, (name, _) in by_storage.items()})
    if seen.cut:
        flow["launches_cut"] = seen.cut
    return result, flow


def _launches(seen: _Seen, names: dict[int, str]) -> list[dict[str, Any]]:
    """The launches recorded one by one, their tensors named: the workspace's by name, the stage's own temporaries
    numbered as first seen; each one's bytes at most its storage's."""
    temporaries: dict[int, str] = {}

    def named(used: dict[int, int]) -> list[dict[str, Any]]:
        out = []
        for s, received in used.items():
            if s not in names and s not in temporaries:
                temporaries[s] = f"temporary {len(temporaries) + 1}"
            size = seen.sizes.get(s, received)
            out.append({"name": names.get(s) or temporaries[s], "bytes": min(received, size)})
        return out

    return [{"kernel": one.kernel, "reads": named(one.reads), "writes": named(one.writes)} for one in seen.launches]


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
