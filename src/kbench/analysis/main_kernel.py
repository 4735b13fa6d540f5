"""The facts of a stage's main kernel (the one holding the most GPU time), for its Evidence: the launch facts the GPU
really ran (grid, block, registers, shared memory: CUPTI, nsys, ncu) and the compiled facts of that kernel alone
(tiling ``compiled_kernels``: instruction mix, spills, pipelining, tensor-core instructions), never those of
another kernel of the stage. Pure."""

from __future__ import annotations

import math
from typing import Any

from kbench.analysis.kernels import StageKernel, StageKernels
from kbench.analysis.ptx import InstructionMix
from kbench.analysis.ptxas import Serialized

# the Evidence fields that describe the main kernel's launch: they win over a stage aggregate a mode measured
LAUNCH_FIELDS = ("ctas", "warps", "registers", "shared_bytes", "launches")


def compiled_of(tiling: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The compiled facts of the Triton kernel ``name`` of a stage (None: not a Triton kernel the stage launched,
    e.g. a cuBLAS or aten kernel); a record from before ``compiled_kernels`` holds one kernel's facts at its top
    level."""
    kernels = tiling.get("compiled_kernels")
    if isinstance(kernels, dict) and name in kernels:
        return dict(kernels[name])
    return dict(tiling) if tiling.get("kernel") == name else None


def launches_per_run(kernels: StageKernels) -> int | None:
    """The stage's kernel launches per run, all kernels together."""
    total = sum(k.launches for k in kernels.kernels)
    return round(total) if kernels.kernels else None


def _grid(main: StageKernel, compiled: dict[str, Any] | None) -> int | None:
    """CTAs of the main kernel: the grid the GPU ran, else the grid Triton launched it with."""
    if main.ctas is not None:
        return main.ctas
    grid = (compiled or {}).get("grid")
    return math.prod(int(g) for g in grid) if grid else None


def facts(tiling: dict[str, Any], kernels: StageKernels) -> dict[str, Any] | None:
    """Evidence fields of the stage's main kernel (None: no kernel listed). Compiled facts only where the main
    kernel is a Triton kernel of the stage; a library kernel's are None (no PTX of it here)."""
    main = kernels.main
    if main is None:
        return None
    compiled = compiled_of(tiling, main.name)
    c = compiled or {}
    threads = main.threads
    share = kernels.share(main.name)
    return {
        "kernel": main.name,
        "share": 1.0 if share is None or len(kernels.kernels) == 1 else share,  # one kernel: all of it, exactly
        "ctas": _grid(main, compiled),
        "warps": -(-threads // 32) if threads else c.get("num_warps"),
        "registers": main.registers if main.registers is not None else c.get("registers"),
        "shared_bytes": main.shared_bytes if main.shared_bytes is not None else c.get("shared_bytes"),
        "launches": launches_per_run(kernels),
        "num_stages": c.get("num_stages"),
        "spilled": c.get("spills"),
        "tensor_cores": c.get("tensor_cores"),
        "instructions": InstructionMix.model_validate(c["instructions"]) if c.get("instructions") else None,
        **serialization(c),
        "tile": dict(tiling.get("config") or {}) if compiled is not None else {},
    }


def serialization(compiled: dict[str, Any]) -> dict[str, Any]:
    """Evidence fields of what ptxas and the SASS say of a compiled kernel's warpgroup MMAs (kbench.analysis.ptxas)."""
    said, drained = compiled.get("wgmma_serialized"), compiled.get("hgmma_drained")
    return {
        "wgmma_serialized": Serialized.model_validate(said) if said else None,
        "hgmma_drained": tuple(int(x) for x in drained) if isinstance(drained, list) and len(drained) == 2 else None,
    }
