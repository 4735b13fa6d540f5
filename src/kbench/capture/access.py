"""Every load and store a Triton kernel makes under Triton's CPU interpreter (TRITON_INTERPRET=1): no GPU.

``traced(allocations)`` hooks the interpreter's builder where every memory access passes (its masked load and store:
plain loads and stores, block-pointer and tensor-descriptor loads and stores go through them, in Triton 3.6, 3.8 and
3.9; and its atomic read-modify-write) and records, per call: load, store or atomic, the kernel's source line (the first
frame outside Triton and this module), the program (its grid index), the byte address of every lane (shape kept: the
last axis is the one neighbouring lanes run along), which lanes the mask lets through, and the element size. Lanes that
run outside the allocation their access is into (of those the caller names) are recorded as out of bounds and masked off
before the interpreter touches them (an unmasked wild read would crash the interpreter's process, not report the bug);
an access into memory the caller did not name (a buffer a plan makes outside its workspace) is not judged.

Built on the interpreter's own builder (triton.runtime.interpreter.InterpreterBuilder), not on Triton-Viz: the
triton-viz 3.0 package (the registry's newest, checked 2026-11-25) does not import under Triton 3.8 (AttributeError:
'InterpreterBuilder' object has no attribute 'create_make_block_ptr', from its frontend's patch table), and it pulls
pyarrow, z3-solver, flask and cairocffi for a web viewer kbench does not use; two hooks give the facts kbench needs,
and a third (``_Sampled``, on GridExecutor) runs a sample of a large grid. These hooks work under Triton 3.6 (the
H100 machine), 3.8 and 3.9 (CI).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_HERE = __file__


@dataclass(frozen=True)
class Access:
    """One load or store call of one program."""

    kind: str  # "load", "store" or "atomic" (a read-modify-write: tl.atomic_add, _max, _xchg, ...)
    site: str  # "<file>:<line>" of the kernel's source
    function: str  # the kernel function
    program: tuple[int, int, int]
    addresses: Any  # numpy int64 array of byte addresses, the pointer tensor's shape
    mask: Any  # numpy bool array, same shape: the lanes that access memory
    elem_bytes: int
    out_of_bounds: int = 0  # active lanes outside every allocation (masked off before the access)
    weight: int = 1  # the programs this one stands for (``traced(programs=...)`` runs a sample of the grid)
    stage: str = ""  # the plan's stage it ran in (``stage(name)`` around its launch), "" where none was said


@dataclass
class Trace:
    """What ``traced`` recorded, and the allocations it checked addresses against."""

    allocations: list[tuple[int, int]]  # [start, end) byte ranges
    accesses: list[Access] = field(default_factory=list)
    grids: list[tuple[int, int, int]] = field(default_factory=list)  # each launch's grid, in launch order
    ran: list[int] = field(default_factory=list)  # the programs each launch ran (its whole grid, or a sample)

    @property
    def whole(self) -> bool:
        """Every program of every launch ran (no sample)."""
        return all(r == g[0] * g[1] * g[2] for r, g in zip(self.ran, self.grids, strict=True))


FIRST = 16  # a sample always runs the grid's first programs (the pictures show them) and its last one


def sample(total: int, limit: int) -> dict[int, int]:
    """Which programs (linear index in the interpreter's x, y, z order) a grid of ``total`` runs when at most about
    ``limit`` may (0: all), each with the programs it stands for: the first ``FIRST``, then every k-th and the
    last, each standing for those up to the next one run (the weights sum to ``total``)."""
    if limit <= 0 or total <= limit:
        return dict.fromkeys(range(total), 1)
    step = max(1, -(-(total - FIRST) // max(1, limit - FIRST)))
    chosen = sorted({*range(min(FIRST, total)), *range(FIRST, total, step), total - 1})
    return {p: nxt - p for p, nxt in zip(chosen, [*chosen[1:], total], strict=True)}


def _site() -> tuple[str, str]:
    """The kernel source line that made the access: the first frame outside Triton's package and this module."""
    frame: Any = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name != _HERE and "/triton/" not in name.replace("\\", "/"):
            return f"{name}:{frame.f_lineno}", frame.f_code.co_name
        frame = frame.f_back
    return "unknown:0", "unknown"


def _outside(
    addresses: Any,
    lanes: Any,
    allocations: Sequence[tuple[int, int]],
    elem_bytes: int,
    known: tuple[int, int] | None = None,
) -> tuple[Any, tuple[int, int] | None]:
    """Which active lanes read or write bytes outside the allocation the access is into: the one holding its first
    active lane (a lane that runs past its tensor into the next allocation is out of bounds too), else the one this
    source line reached before (``known``: a program whose lanes all left its tensor, as an offset that overflowed
    int32 sends them); and that allocation. Where neither is known (a buffer the plan made outside its workspace),
    nothing is judged."""
    none = np.zeros(addresses.shape, dtype=bool)
    active = addresses[lanes]
    if active.size == 0:
        return none, known
    first = int(active.reshape(-1)[0])
    home = next(((s, e) for s, e in allocations if s <= first and first + elem_bytes <= e), known)
    if home is None:
        return none, None
    start, end = home
    return lanes & ~((addresses >= start) & (addresses + elem_bytes <= end)), home


_STAGE = [""]  # the stage whose launch is running (``stage``)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Label the accesses made in the block as the stage ``name``'s."""
    before, _STAGE[0] = _STAGE[0], name
    try:
        yield
    finally:
        _STAGE[0] = before


class _Sampled:
    """A kernel's Python body that runs only for the programs ``run()`` lets through. It keeps what the interpreter
    reads of the function it wraps: its signature (the arguments it passes) and its globals (where it patches
    triton.language)."""

    def __init__(self, body: Any, run: Any) -> None:
        self.body, self.run = body, run
        self.__globals__ = body.__globals__
        self.__signature__ = inspect.signature(body)
        self.__name__ = body.__name__

    def __call__(self, **args: Any) -> Any:
        return self.body(**args) if self.run() else None


@contextlib.contextmanager
def traced(allocations: Sequence[tuple[int, int]], programs: int = 0) -> Iterator[Trace]:
    """Record every access of the kernels run under the interpreter in the block (see the module's docstring). With
    ``programs`` > 0 a launch of a larger grid runs a sample of about that many programs (``sample``), each access
    weighted by the programs its program stands for: the facts at full size in a fraction of the time (the kernel's
    output is then incomplete)."""
    from triton.runtime import interpreter as it

    trace = Trace(list(allocations))
    builder = it.InterpreterBuilder
    masked_load, masked_store = builder.create_masked_load, builder.create_masked_store
    atomic_rmw = builder.create_atomic_rmw
    executor_init = it.GridExecutor.__init__
    weights: dict[int, int] = {}
    current = [0]  # the programs the running one stands for (0: not one of the sample)
    homes: dict[str, tuple[int, int]] = {}  # source line -> the allocation its accesses are into

    def choose(b: Any) -> bool:
        """Whether the program the interpreter is about to run is one of the launch's sample (and its weight)."""
        grid = tuple(int(g) for g in b.grid_dim)
        x, y, z = (int(i) for i in b.grid_idx)
        if (x, y, z) == (0, 0, 0):  # a launch begins: choose its programs
            weights.clear()
            weights.update(sample(grid[0] * grid[1] * grid[2], programs))
            trace.grids.append((grid[0], grid[1], grid[2]))
            trace.ran.append(len(weights))
        current[0] = weights.get((x * grid[1] + y) * grid[2] + z, 0)
        return current[0] > 0

    def init(self: Any, fn: Any, *rest: Any, **named: Any) -> None:
        executor_init(self, fn, *rest, **named)
        self.fn = _Sampled(self.fn, lambda: choose(it.interpreter_builder))

    def record(kind: str, self: Any, ptrs: Any, mask: Any) -> Any:
        elem = int(np.dtype(it._get_np_dtype(ptrs.get_element_ty())).itemsize)
        addresses = np.asarray(ptrs.data, dtype=np.int64)
        lanes = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
        site, function = _site()
        wild, home = _outside(addresses, lanes, trace.allocations, elem, homes.get(site))
        if home is not None:
            homes[site] = home
        x, y, z = (int(i) for i in (self.grid_idx or (0, 0, 0)))
        access = Access(
            kind,
            site,
            function,
            (x, y, z),
            addresses.copy(),
            lanes.copy(),
            elem,
            int(wild.sum()),
            current[0],
            _STAGE[0],
        )
        trace.accesses.append(access)
        if wild.any():
            mask = it.TensorHandle(lanes & ~wild, mask.dtype)
        return mask

    def load(self: Any, ptrs: Any, mask: Any, *rest: Any, **named: Any) -> Any:
        return masked_load(self, ptrs, record("load", self, ptrs, mask), *rest, **named)

    def store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **named: Any) -> Any:
        return masked_store(self, ptrs, value, record("store", self, ptrs, mask), *rest, **named)

    def atomic(self: Any, op: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **named: Any) -> Any:
        return atomic_rmw(self, op, ptrs, value, record("atomic", self, ptrs, mask), *rest, **named)

    builder.create_masked_load = load
    builder.create_masked_store = store
    builder.create_atomic_rmw = atomic
    it.GridExecutor.__init__ = init
    try:
        yield trace
    finally:
        builder.create_masked_load = masked_load
        builder.create_masked_store = masked_store
        builder.create_atomic_rmw = atomic_rmw
        it.GridExecutor.__init__ = executor_init


def tensors_of(workspace: Any) -> list[tuple[str, Any]]:
    """Every torch tensor in a plan's workspace (a dict, list or object of them, nested), with its name there."""
    import torch

    found: list[tuple[str, Any]] = []
    seen: set[int] = set()

    def walk(obj: Any, name: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            found.append((name or "tensor", obj))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{name}.{k}" if name else str(k))
        elif isinstance(obj, list | tuple):
            for i, v in enumerate(obj):
                walk(v, f"{name}[{i}]")
        elif hasattr(obj, "__dict__"):
            for k, v in vars(obj).items():
                walk(v, f"{name}.{k}" if name else k)

    walk(workspace, "")
    return found


def named_tensors(workspace: Any) -> list[tuple[str, int, int, tuple[int, ...]]]:
    """The workspace's tensors as kbench.analysis.access.touched takes them: name, data address, element size,
    shape."""
    return [(n, int(t.data_ptr()), t.element_size(), tuple(t.shape)) for n, t in tensors_of(workspace)]


def allocations_of(workspace: Any) -> list[tuple[int, int]]:
    """The byte ranges of the storages the workspace's tensors lie in (a view's neighbours are in bounds)."""
    out = []
    for _, t in tensors_of(workspace):
        base = int(t.untyped_storage().data_ptr())
        out.append((base, base + int(t.untyped_storage().nbytes())))
    return out
