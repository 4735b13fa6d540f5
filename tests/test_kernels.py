"""Shipped kernels are correct for every tuning configuration: on the GPU when present, else under Triton's
CPU interpreter at small sizes (bf16 plans then run in float16, which the result says)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kbench.capture.check import check_plan, cpu_values
from kbench.plan.discovery import load_version, packages
from tests.conftest import HAS_CUDA

DEVICE = "cuda" if HAS_CUDA else "cpu"
BAD = Path(__file__).parent / "data" / "bad_kernels"
# every version of every shipped package, as discovery finds them (a new version is checked without editing this)
SHIPPED = [(name, v) for name, ref in packages().items() if ref.origin == "kbench" for v in ref.versions()]


def _plan(package: str, version: str, extra: list[str] | None = None, **values):
    cls = load_version(package, version, extra)
    note = ""
    if not HAS_CUDA:
        values, note = cpu_values(cls, values)
    else:
        values = {**cls.check_params, **values}
    return cls.from_values(values), note


def test_discovery_finds_the_shipped_versions() -> None:
    assert {("vector_add", "v2"), ("matmul", "torch_mm"), ("fork_join", "serial")} <= set(SHIPPED)


@pytest.mark.slow
@pytest.mark.parametrize(("package", "version"), SHIPPED)
def test_every_tuning_config_matches_the_reference(package: str, version: str) -> None:
    plan, note = _plan(package, version)
    results = check_plan(plan, DEVICE, note)
    stages = plan.checked_stages()  # every config of each stage once (later stages' defaults ride with stage 0's)
    assert len(results) == len(stages[0].tuning) + sum(len(s.tuning) - 1 for s in stages[1:])
    for r in results:
        assert r.result.passed, r.result.line()
        if r.result.compiled:  # a Gluon kernel on a CPU: compiled for sm_90, not run (tests/test_gluon.py)
            assert DEVICE == "cpu" and "compiled for sm_90a" in r.result.compiled
            continue
        assert r.result.rel_err <= plan.rtol()


@pytest.mark.skipif(HAS_CUDA, reason="the dtype swap applies to the CPU interpreter only")
def test_bf16_plans_are_checked_in_fp16_on_cpu_and_say_so() -> None:
    plan, note = _plan("matmul", "base")
    assert plan.dtype == "float16" and "not a bf16 pass" in note
    (r,) = check_plan(plan, "cpu", note)
    assert r.result.dtype == "float16" and "not a bf16 pass" in r.result.line()


def test_fp32_vector_add_keeps_its_dtype() -> None:
    plan, note = _plan("vector_add", "base", dtype="float32")
    assert plan.dtype == "float32" and note == ""


def test_a_wrong_result_fails_the_check() -> None:
    plan, _ = _plan("wrong", "base", [str(BAD)])
    (r,) = check_plan(plan, DEVICE)
    assert not r.result.passed and 0.5 < r.result.rel_err < 2.0
    assert r.result.line().startswith("FAIL: relative L2 error")


def test_an_unwritten_output_is_caught_by_the_nan_poison() -> None:
    plan, _ = _plan("wrong", "partial", [str(BAD)])
    (r,) = check_plan(plan, DEVICE)
    assert not r.result.passed and math.isinf(r.result.rel_err)


def test_run_all_launches_every_stage_in_order_inside_around() -> None:
    from contextlib import contextmanager

    from kbench.capture.prepare import prepare

    plan, _ = _plan("fork_join", "base")
    prep = prepare(plan, DEVICE, seed=1)
    seen: list[str] = []

    @contextmanager
    def around(name: str):
        seen.append(f"<{name}")
        yield
        seen.append(f"{name}>")

    prep.run_all(around=around)
    assert seen == ["<mm", "mm>", "<rowsum", "rowsum>", "<combine", "combine>"]
