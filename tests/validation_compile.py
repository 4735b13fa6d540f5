"""Run by tests/test_validation_kernels.py without TRITON_INTERPRET: the fdiv pair's kernel compiled for an H100
(sm_90) on a machine without one, per version the PTX's division and reciprocal instructions, or why it cannot
compile."""

import importlib
import json
import re
import sys
import warnings
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).parent / "data" / "validation"))
ratio_sum_kernel = importlib.import_module("fdiv._common").ratio_sum_kernel  # the package by its folder name

warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION")  # Triton 3.9's notice, not ours


def ops(div: str) -> list[str]:
    sig = {"x_ptr": "*fp32", "c_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "K": "constexpr", "DIV": "constexpr"}
    sig["BLOCK"] = "constexpr"
    src = ASTSource(ratio_sum_kernel, sig, constexprs={"K": 128, "DIV": div, "BLOCK": 1024})
    ptx = str(triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"])
    return sorted(set(re.findall(r"\b(?:div|rcp|rsqrt)\.[a-z0-9.]+", ptx)))


if __name__ == "__main__":
    found: dict[str, object]
    try:
        found = {div: ops(div) for div in ("rn", "full", "rsqrt")}
    except Exception as e:  # a Triton build without the CUDA toolchain
        found = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    print(json.dumps(found))
