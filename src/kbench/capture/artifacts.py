"""Per-stage artifacts of a run folder: tiling/<stage>.json, tiling/<stage>/autotuning.json, compiled/<stage>/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbench.analysis import ptxas as ptxas_facts
from kbench.analysis.ptx import instruction_mix
from kbench.analysis.ttgir import compiled_facts
from kbench.capture import ptxas, sass
from kbench.capture.prepare import Launched, PreparedStage
from kbench.fsutil import write_json_atomic

# Triton's CompiledKernel.asm keys and the file suffix each is written with
ASM_FILES = {"ttir": "ttir", "ttgir": "ttgir", "llir": "llir", "ptx": "ptx", "cubin": "cubin", "source": "source"}


def _json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)


def kernel_facts(compiled: Any) -> dict[str, Any]:
    """Name, warps, stages, shared memory, registers and spills of a Triton CompiledKernel."""
    if compiled is None:
        return {}
    meta = compiled.metadata
    asm = getattr(compiled, "asm", {}) or {}
    # a Gluon kernel starts from its own TTGIR (no TTIR stage) and pipelines by hand: Triton's num_stages, always in
    # its metadata, does not apply to it
    gluon = "ttir" not in asm and "ttgir" in asm
    facts: dict[str, Any] = {
        "kernel": getattr(meta, "name", None),
        "language": "gluon" if gluon else "triton",
        "num_warps": getattr(meta, "num_warps", None),
        "num_stages": None if gluon else getattr(meta, "num_stages", None),
        "shared_bytes": getattr(meta, "shared", None),
    }
    try:
        compiled._init_handles()  # loads the cubin; registers and spills are known after this
        facts["registers"] = getattr(compiled, "n_regs", None)
        facts["spills"] = getattr(compiled, "n_spills", None)
    except Exception:  # not loadable here: leave them unmeasured
        facts["registers"] = facts["spills"] = None
    ptx = asm.get("ptx")
    # the kernel's instruction mix; tensor-core instructions (mma.sync, wgmma.mma_async) among it: None when there
    # is no PTX to read
    mix = instruction_mix(ptx) if isinstance(ptx, str) else None
    facts["tensor_cores"] = None if mix is None else mix.tensor_cores
    facts["instructions"] = None if mix is None else mix.model_dump(mode="json")
    facts.update(compiled_facts(asm.get("ttgir")))  # what one program executes: atomics, dots
    return facts


def launched(ps: PreparedStage) -> dict[str, Launched]:
    """Every Triton kernel the stage launched, by name (the one its launch returned among them)."""
    ran = dict(ps.launched)
    if ps.compiled is not None:
        ran.setdefault(str(getattr(ps.compiled.metadata, "name", ps.stage.name)), Launched(ps.compiled, None))
    return ran


def compiled_kernels(ran: dict[str, Launched]) -> dict[str, dict[str, Any]]:
    """The tiling record's ``compiled_kernels``: each kernel's facts, the grid Triton launched it with and its
    launches per run of the stage."""
    return {name: {**kernel_facts(k.compiled), "grid": k.grid, "launches": k.launches} for name, k in ran.items()}


def write_stage(run_dir: Path, ps: PreparedStage) -> dict[str, Any]:
    """Write the stage's tiling, autotuning history and compiler output; return the tiling record. The top-level
    kernel facts are those of the kernel its launch returned (or the last it launched); ``compiled_kernels`` holds
    every Triton kernel it launched."""
    name = ps.stage.name
    ran = launched(ps)
    every = compiled_kernels(ran)  # each kernel's facts read once (PTX, TTGIR, the loaded cubin)
    out = run_dir / "compiled" / name
    out.mkdir(parents=True, exist_ok=True)
    for base, facts in written(out, ran).items():  # what ptxas and the SASS say of each kernel
        every[base].update(facts)
    own = next((n for n, k in ran.items() if k.compiled is ps.compiled), None)
    top = (
        {k: v for k, v in every[own].items() if k not in ("grid", "launches")}
        if own is not None
        else kernel_facts(ps.compiled)
    )
    tiling = {
        "stage": name,
        "config": ps.config,
        "grid": list(ps.launch.grid) if ps.launch.grid else None,
        "declared_kernels": list(ps.stage.kernels),
        "tuning_source": ps.tune.source,
        **top,
        "dataflow": ps.flow,
    }
    if ran:  # every Triton kernel it launched (a library stage has none)
        tiling["compiled_kernels"] = every
    if ps.tune.decision:  # the report's autotune line: kept or chosen, the margin over the runner-up, within noise
        tiling["tuning"] = ps.tune.decision
    if ps.self_tuned:  # its kernels' own @triton.autotune picks, each with its line (every config's time below)
        tiling["triton_autotune"] = [{k: v for k, v in r.items() if k != "tried"} for r in ps.self_tuned]
    _json(run_dir / "tiling" / f"{name}.json", tiling)
    _json(
        run_dir / "tiling" / name / "autotuning.json",
        {
            "stage": name,
            "source": ps.tune.source,
            "cache_entry": str(ps.tune.path) if ps.tune.path else None,
            "chosen": ps.config,
            "space": list(ps.stage.tuning),
            "tried": ps.tune.history,  # each candidate's median, spread and the median's 95% interval
            "decision": ps.tune.decision,
            "triton_autotune": ps.self_tuned,  # what its kernels' own @triton.autotune chose, each config timed
        },
    )
    if not ran:
        (out / "README.txt").write_text(
            f"Stage {name} launches no Triton kernel (a library call such as torch.mm / cuBLAS): "
            "there are no compiler artifacts to keep.\n"
        )
    return tiling


def written(out: Path, ran: dict[str, Launched]) -> dict[str, dict[str, Any]]:
    """Write each kernel's compiler output, its SASS (where nvdisasm is here) and ptxas's messages (where ptxas is:
    compiled/<stage>/ptxas.txt) into ``out``; by kernel, what ptxas and the SASS say of it (kbench.analysis.ptxas)."""
    tool = sass.nvdisasm()
    listed: dict[str, Path | None] = {}
    for base, k in ran.items():
        write_compiled(out, base, k.compiled)
        listed[base] = sass.disassemble(out / f"{base}.cubin", tool)  # the machine code's per-line mix
    said = ptxas.keep(out, list(ran), ptxas.find()) if ran else {}
    return {
        base: ptxas_facts.facts(said.get(base), path.read_text() if path else None, base)
        for base, path in listed.items()
    }


def write_compiled(out: Path, base: str, compiled: Any) -> None:
    """One compiled kernel's compiler output as compiled/<stage>/<kernel>.<ttir|ttgir|llir|ptx|cubin|source|json>."""
    for key, suffix in ASM_FILES.items():
        if key in compiled.asm:
            data = compiled.asm[key]
            target = out / f"{base}.{suffix}"
            if isinstance(data, bytes):
                target.write_bytes(data)
            else:
                target.write_text(str(data))
    meta = compiled.metadata
    _json(out / f"{base}.json", meta._asdict() if hasattr(meta, "_asdict") else vars(meta))
