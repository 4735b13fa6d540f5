"""Run by tests/test_intra_record.py without TRITON_INTERPRET: the shipped matmul kernel compiled for an H100
(sm_90) on a machine without one; prints what its PTX holds with PROFILE on and off, or why it cannot compile."""

import json

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kbench.kernel.matmul._triton import mm_kernel


def ptx(profile: bool) -> str:
    sig = {n: "i32" for n in ("M", "N", "K", "s_am", "s_ak", "s_bk", "s_bn", "s_cm", "s_cn")}
    sig.update({"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "prof_buf": "*i64"})
    consts = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "PROFILE": profile}
    sig.update(dict.fromkeys(consts, "constexpr"))
    compiled = triton.compile(ASTSource(mm_kernel, sig, constexprs=consts), target=GPUTarget("cuda", 90, 32))
    return str(compiled.asm["ptx"])


if __name__ == "__main__":
    found: dict[str, object]
    try:
        found = {str(p): {k: ptx(p).count(k) for k in ("%globaltimer", "%smid", "st.global")} for p in (True, False)}
    except Exception as e:  # a Triton build without the CUDA toolchain
        found = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    print(json.dumps(found))
