"""`kbench check`: the correctness check alone, on the GPU when there is one, else under Triton's interpreter.

Every configuration of every stage's tuning space is checked (the other stages at their first config), with
fresh random inputs and the output poisoned with NaN first. The interpreter has no bfloat16 arithmetic, so a
bf16 plan is checked there in float16 and the result says so: that is never a bf16 pass.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbench.capture.prepare import CheckResult, Prepared, PreparedStage, built, check, guarded
from kbench.errors import UsageError
from kbench.plan import autotune
from kbench.plan.base import Config, KernelPlan

INTERPRETER = "cpu (Triton interpreter, TRITON_INTERPRET=1)"


@dataclass(frozen=True)
class ConfigCheck:
    stage: str
    config: Config
    result: CheckResult
    sites: tuple[Any, ...] = ()  # under the interpreter: what each load/store line did (kbench.analysis.access)
    touched: tuple[Any, ...] = ()  # with maps=True: which program first read/wrote each element, per tensor


def use_interpreter() -> None:
    """Must run before any plan module is imported: triton.jit decides at decoration time."""
    os.environ["TRITON_INTERPRET"] = "1"


def cpu_values(plan_cls: type[KernelPlan], values: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Small interpreter sizes (unless the user set them) and a dtype the interpreter computes correctly."""
    return cpu_dtype(plan_cls, {**plan_cls.check_params, **values})


def cpu_dtype(plan_cls: type[KernelPlan], values: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``values`` with a dtype the interpreter computes correctly (bf16 as fp16 or fp32), and a note saying so."""
    merged = dict(values)
    dtype = merged.get("dtype", plan_cls.model_fields["dtype"].default)
    note = ""
    if dtype == "bfloat16":
        info = next((p for p in plan_cls.params() if p.name == "dtype"), None)
        allowed = [str(c) for c in info.choices] if info and info.choices else ["float16", "float32"]
        instead = next((d for d in ("float16", "float32") if d in allowed), None)
        if instead is None:
            raise UsageError(
                f"{plan_cls.package_name()} {plan_cls.version_name()} allows only dtype {'|'.join(allowed)}, and "
                "Triton's CPU interpreter has no bfloat16 arithmetic, so it cannot be checked here: allow float16 "
                "or float32 in the plan's dtype for CPU checks, or run `kbench check` on a GPU machine"
            )
        merged["dtype"] = instead
        note = f"bf16 plan checked in {instead}: the interpreter has no bfloat16 arithmetic (not a bf16 pass)"
    return merged, note


def check_plan(plan: KernelPlan, device: str, note: str = "", maps: bool = False) -> list[ConfigCheck]:
    where = "cuda" if device == "cuda" else INTERPRETER
    stages = plan.checked_stages()
    ws = guarded("setup", lambda: plan.setup(device, time.time_ns() % (2**31)))
    defaults = [dict(s.tuning[0]) for s in stages]
    out: list[ConfigCheck] = []
    for i, stage in enumerate(stages):
        for cfg in stage.tuning:
            if i > 0 and cfg == defaults[i]:
                continue  # that combination was checked with stage 0's configs
            chosen = [*defaults[:i], dict(cfg), *defaults[i + 1 :]]
            prep = fixed(plan, device, ws, chosen)
            result, sites, touched, _ = traced_check(prep, where, note, maps and not out)
            out.append(ConfigCheck(stage.name, dict(cfg), result, tuple(sites), tuple(touched)))
    return out


def fixed(
    plan: KernelPlan,
    device: str,
    ws: Any,
    configs: list[Config],
    wrap: Callable[[str, Callable[[], object]], Callable[[], object]] | None = None,
) -> Prepared:
    """The plan's stages built at ``configs`` (one per stage, none tuned) on ``ws``; ``wrap(stage, fn)`` wraps each
    launch."""
    prep = Prepared(plan=plan, device=device, ws=ws)
    for stage, config in zip(plan.checked_stages(), configs, strict=True):
        launch = built(plan, stage, ws, config)
        if wrap is not None:
            launch = dataclasses.replace(launch, fn=wrap(stage.name, launch.fn))
        tune = autotune.TuneResult(best=config, history=[], source="fixed", path=None)
        prep.stages.append(PreparedStage(stage, config, launch, tune))
    return prep


def traced_check(
    prep: Prepared, where: str, note: str, maps: bool = False
) -> tuple[CheckResult, list[Any], list[Any], Any]:
    """The check, and under the interpreter the facts of every load and store line (kbench.capture.access) and, with
    ``maps``, which program first read and wrote each element of each workspace tensor: a lane that reaches outside
    its tensor fails the check, naming the source line and the program (the lane itself is masked off, so the
    interpreter survives to say so); and the trace itself (None on the GPU: the check alone)."""
    if prep.device == "cuda":
        return check(prep, where, note), [], [], None
    from kbench.analysis.access import sites, touched
    from kbench.capture import access, gluon

    with gluon.compile_only() as made, access.traced(access.allocations_of(prep.ws)) as trace:
        result = check(prep, where, note)
    if made:  # a Gluon kernel compiled, not run: the output was never computed, so no numeric verdict
        plan = prep.plan
        result = dataclasses.replace(result, passed=True, compiled=gluon.said(made, plan.package, plan.version))
    facts = sites(trace.accesses)
    elements = touched(trace.accesses, access.named_tensors(prep.ws)) if maps else []
    said = out_of_bounds(facts)
    if said is None:
        return result, facts, elements, trace
    return dataclasses.replace(result, passed=False, out_of_bounds=said), facts, elements, trace


def out_of_bounds(facts: list[Any]) -> str | None:
    """The first load/store line with lanes outside their tensor, in words (None: there is none)."""
    wild = [s for s in facts if s.out_of_bounds]
    if not wild:
        return None
    w = wild[0]
    more = f"; {len(wild) - 1} more site(s)" if len(wild) > 1 else ""
    return (
        f"{w.out_of_bounds} lane(s) of the {w.kind} at {w.site} ({w.function}) reach outside its tensor, first in "
        f"program {w.first_oob_program}{more}"
    )
