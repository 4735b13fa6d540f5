"""Gluon kernels where there is no GPU. Triton's CPU interpreter runs ``@triton.jit`` kernels, not ``@gluon.jit``
ones (Gluon's explicit layouts, warpgroup MMAs, TMA and mbarriers have no interpreter): under a CPU check a Gluon
kernel is compiled for an sm_90 target instead, by Triton's own compiler and the ptxas it bundles, and never
launched, so that a kernel that no longer compiles still fails on a CPU (CI), and its numerics are left to a GPU.

The compile goes through the kernel's own ``run`` with ``warmup=True`` (compile, do not launch) while a stand-in
driver answers for the device Triton asks about (an sm_90 target, device 0, stream 0). Measured with Triton 3.9 on
a machine without a GPU: the PTX (.target sm_90a) and the cubin are produced. A Triton without Gluon, or whose
runtime lacks what this relies on, makes no stand-in: the kernel then fails as it would have, and says why.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

ARCH = 90  # the target a CPU check compiles Gluon kernels for (Hopper: the lent H100's)


@dataclass(frozen=True)
class Compiled:
    """A Gluon kernel compiled, not run, under a CPU check."""

    name: str
    arch: str  # "sm_90a", read from the PTX
    cubin_bytes: int
    wgmma: int  # warpgroup MMAs, TMA copies and mbarrier operations in the PTX (each once as written)
    tma: int
    mbarrier: int

    @classmethod
    def of(cls, name: str, kernel: Any) -> Compiled:
        from kbench.analysis.ptx import instruction_mix

        asm = getattr(kernel, "asm", {}) or {}
        ptx = str(asm.get("ptx", ""))
        target = re.search(r"^\.target\s+(\S+)", ptx, re.MULTILINE)
        mix = instruction_mix(ptx)  # the PTX mix every compiled kernel's facts hold (wgmma, TMA)
        return cls(
            name=name,
            arch=target.group(1) if target else "n/a",
            cubin_bytes=len(asm.get("cubin", b"") or b""),
            wgmma=sum(o.count for o in mix.tensor_ops if o.op == "wgmma"),
            tma=mix.tma_loads + mix.tma_stores,
            mbarrier=len(re.findall(r"\bmbarrier\.", ptx)),
        )

    def words(self) -> str:
        ops = ", ".join(f"{n} {k}" for k, n in (("wgmma", self.wgmma), ("TMA", self.tma), ("mbarrier", self.mbarrier)))
        return f"{self.name} compiled for {self.arch} ({self.cubin_bytes} B of cubin; PTX: {ops})"


class _Sm90:
    """The driver Triton asks about while a CPU check compiles a Gluon kernel: an sm_90 target, no device."""

    def is_active(self) -> bool:
        return True

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", ARCH, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def map_python_to_cpp_type(self, ty: str) -> str:
        from triton.backends.nvidia.driver import ty_to_cpp

        return str(ty_to_cpp(ty))


@contextlib.contextmanager
def compile_only() -> Iterator[list[Compiled]]:
    """Inside: every Gluon kernel a stage calls, and every compiled Triton kernel beside it (v13's chained
    combine), is compiled for sm_90 and not launched; the list says which."""
    made: list[Compiled] = []
    try:
        from triton.experimental.gluon._runtime import GluonJITFunction
        from triton.runtime import driver
        from triton.runtime.jit import JITFunction
    except ImportError:  # a Triton without Gluon: nothing to stand in for
        yield made
        return
    if not hasattr(driver, "_active") or not hasattr(GluonJITFunction, "run"):
        yield made
        return
    original = GluonJITFunction.run
    language = language_now()  # as the region begins: the interpreter's device calls leave their patches behind

    def compiling(launch: Any) -> Any:
        def run(self: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
            swapped = _compilable_library()  # for this compile only: interpreted Triton kernels still need theirs
            leftover = restore_language(language)
            try:
                with warnings.catch_warnings():  # Triton 3.9's notice of a default it will change (fp fusion)
                    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION")
                    kernel = launch(self, *args, grid=grid, warmup=True, **kwargs)
            finally:
                restore_language(leftover)
                for module, name, value in swapped:
                    setattr(module, name, value)
            made.append(Compiled.of(str(getattr(self, "__name__", "a kernel")), kernel))
            return kernel

        return run

    previous = driver._active
    plain = JITFunction.run  # Triton kernels (an interpreted one is no JITFunction: it runs)
    own = "run" in vars(GluonJITFunction)  # a Triton whose Gluon kernels launch their own way
    GluonJITFunction.run = compiling(original)
    JITFunction.run = compiling(plain)
    driver._active = _Sm90()
    try:
        yield made
    finally:
        JITFunction.run = plain
        if own:
            GluonJITFunction.run = original
        else:
            del GluonJITFunction.run
        driver._active = previous
        restore_language(language)  # what this region's interpreted kernels left patched, undone for the next compile


_State = dict[Any, dict[str, Any]]


def language_now() -> _State:
    """The attributes of what Triton's interpreter patches (triton.language, its core, tensor, math, dtype, condition
    and tensor descriptors), as they are now. Triton 3.9's interpreter patches them for each interpreted run and puts
    them back, but its device-function calls (a @jit helper called from a kernel) patch them and never put them back:
    a Gluon kernel compiled later in the same process then meets interpreter semantics in tensor arithmetic ("'value'
    object has no attribute 'dtype'", found checking every mla_decode version with an empty Triton cache)."""
    import triton.language as tl

    core = tl.core
    owners = [tl, core, core.tensor, tl.math, core.dtype, getattr(core, "condition", None)]
    owners.append(getattr(core, "tensor_descriptor_base", None))
    return {o: dict(vars(o)) for o in owners if o is not None}


def restore_language(state: _State) -> _State:
    """Each owner's attributes put back as ``state`` has them (those added since removed from classes; a module's
    new attributes, lazily imported submodules, kept); returns what was there, to put back in turn."""
    before = language_now()
    for owner, attrs in state.items():
        now = before.get(owner, {})
        for name, value in attrs.items():
            if now.get(name) is not value:
                setattr(owner, name, value)
        if isinstance(owner, type):
            for name in set(now) - set(attrs):
                delattr(owner, name)
    return before


def _compilable_library() -> list[tuple[Any, str, Any]]:
    """Triton's library functions made compilable again for the time of a compile: imported under the interpreter
    (TRITON_INTERPRET=1, as a CPU check runs), ``triton.language``'s @jit helpers are interpreter functions, which
    the compiler refuses where a Gluon kernel calls them (gl.max, gl.sum: "Unsupported function referenced:
    InterpretedFunction"); each is swapped for a compiler JITFunction of the same Python function. Returns what to
    put back."""
    import sys

    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    swapped: list[tuple[Any, str, Any]] = []
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith(("triton.language", "triton.experimental.gluon")):
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, InterpretedFunction):
                swapped.append((module, name, value))
                setattr(module, name, JITFunction(value.fn))
    return swapped


NOT_RUN = (
    "Triton's CPU interpreter cannot run Gluon kernels, so their numerics are not checked here: run `kbench check "
    "{package} {version}` on a CUDA machine (every GPU mode checks them too)"
)


def said(made: list[Compiled], package: str, version: str) -> str:
    """What a CPU check did with the Gluon kernels it met, in one line."""
    names = "; ".join(dict.fromkeys(c.words() for c in made))
    return f"{names}; {NOT_RUN.format(package=package, version=version)}"
