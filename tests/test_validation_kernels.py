"""The design-distance pairs of issue 51 (tests/data/validation): each version matches its reference under Triton's
CPU interpreter (on the GPU when present), and a pair's versions declare the same cost model and the kernels they
launch. A "before" launches two kernels in its one stage (the design the "after" removes), the "after" one."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench.capture.check import check_plan, cpu_values
from kbench.plan.base import KernelPlan
from kbench.plan.discovery import load_version
from tests.conftest import HAS_CUDA

VALIDATION = [str(Path(__file__).parent / "data" / "validation")]
DEVICE = "cuda" if HAS_CUDA else "cpu"
# package: the kernels of (before, after)
PAIRS = {
    "scores": (["scores_kernel", "softmax_pv_kernel"], ["flash_kernel"]),
    "epilogue": (["gemm_kernel", "epilogue_kernel"], ["gemm_kernel"]),
    "splitkv": (["decode_kernel", "combine_kernel"], ["decode_kernel"]),
    "splitk_gemm": (["mm_kernel", "sum_kernel"], ["mm_kernel"]),
}


def _plan(package: str, version: str, check_sizes: bool) -> KernelPlan:
    cls = load_version(package, version, VALIDATION)
    values = cpu_values(cls, {})[0] if check_sizes and not HAS_CUDA else {}
    return cls.from_values(values)


@pytest.mark.slow
@pytest.mark.parametrize("package", sorted(PAIRS))
@pytest.mark.parametrize("version", ["before", "after"])
def test_each_version_matches_its_reference(package: str, version: str) -> None:
    plan = _plan(package, version, check_sizes=True)
    (r,) = check_plan(plan, DEVICE)  # one stage, one configuration
    assert r.result.passed and r.result.rel_err <= plan.rtol(), r.result.line()


@pytest.mark.parametrize("package", sorted(PAIRS))
def test_a_pairs_versions_share_the_model_and_declare_their_kernels(package: str) -> None:
    before, after = (_plan(package, v, check_sizes=False) for v in ("before", "after"))
    ((b,), (a,)) = before.checked_stages(), after.checked_stages()
    assert (b.name, b.flops, b.dram_bytes, b.precision) == (a.name, a.flops, a.dram_bytes, a.precision)
    assert b.precision == "fp16" and b.flops > 0 and b.dram_bytes > 0
    assert (list(b.kernels), list(a.kernels)) == PAIRS[package]
