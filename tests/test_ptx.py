"""The instruction mix of compiled kernels, read from real PTX: the H100 runs' kernels in docs/examples (Triton 3.6)
and kernels Triton 3.9 lowered for sm_90 on a CPU (tests/data/ptx_triton39_sm90: mma.sync on tf32, an atomic,
special functions, TMA copies)."""

from __future__ import annotations

from pathlib import Path

from kbench.analysis.ptx import instruction_mix, precision
from tests.conftest import DATA

EXAMPLES = Path(__file__).parents[1] / "tests" / "data" / "examples_h100_1122"  # the H100 runs of 2026-11-22..24
SM90 = DATA / "ptx_triton39_sm90"


def test_the_h100_matmul_uses_warpgroup_mma_on_bf16_and_cp_async_copies() -> None:
    mix = instruction_mix((EXAMPLES / "event-matmul-v2" / "compiled" / "mm" / "mm_kernel.ptx").read_text())
    assert [(o.op, o.shape, o.types) for o in mix.tensor_ops] == [("wgmma", "m64n256k16", "f32.bf16.bf16")]
    assert mix.tensor_cores and mix.operand_precision == "bf16"
    # operands staged by 16-byte cp.async copies (no TMA), the bf16 tile stored 16 bytes per thread
    assert mix.cp_async == {16: 36} and mix.tma_loads == 0 and mix.global_loads == {}
    assert mix.global_stores == {16: 16} and mix.float_conversions == 64 and mix.local == 0
    base = instruction_mix((EXAMPLES / "annotation-matmul-base" / "compiled" / "mm" / "mm_kernel.ptx").read_text())
    assert [o.shape for o in base.tensor_ops] == ["m64n128k16"]  # BLOCK_N=128 against v2's 256


def test_vector_add_moves_16_bytes_per_thread_and_uses_no_tensor_cores() -> None:
    mix = instruction_mix((EXAMPLES / "annotation-vector_add-base" / "compiled" / "add" / "add_kernel.ptx").read_text())
    assert not mix.tensor_cores and mix.operand_precision is None
    assert mix.global_loads == {16: 4} and mix.global_stores == {16: 2} and mix.fp32_math == 8


def test_mma_sync_on_tf32_an_atomic_and_special_functions() -> None:
    mix = instruction_mix((SM90 / "dot_tf32_atomic_sm90_w1.ptx").read_text())
    assert [(o.op, o.shape, o.types, o.count) for o in mix.tensor_ops] == [("mma", "m16n8k8", "f32.tf32.tf32.f32", 32)]
    assert mix.operand_precision == "tf32"
    assert mix.atomics == 1 and mix.shared_atomics == 0 and mix.special == 32
    assert mix.global_loads == {4: 64} and mix.global_stores == {4: 32}  # one warp: scalar accesses


def test_tma_copies_and_conversions() -> None:
    mix = instruction_mix((SM90 / "tma_copy_sm90_w4.ptx").read_text())
    assert (mix.tma_loads, mix.tma_stores) == (1, 1) and mix.global_loads == {} and mix.cp_async == {}
    assert mix.float_conversions == 64 and not mix.tensor_cores  # fp32 -> bf16 -> fp16, 32 of each per thread


def test_operand_precision_of_each_tensor_instruction_form() -> None:
    assert precision("f32.bf16.bf16") == "bf16"  # wgmma: D.A.B
    assert precision("f32.f16.f16.f32") == "fp16"  # mma.sync: D.A.B.C
    assert precision("f32.e4m3.e5m2") == "fp8"
    assert precision("s32.s8.s8.s32") == "int8"
    assert precision("f32.bf16.f16") is None  # mixed operands: not one precision


def test_the_tiling_section_shows_each_kernels_mix_in_one_line() -> None:
    """As tiling/<stage>.json holds it (JSON: widths as strings), read back into the Tiling section's line."""
    import json

    from kbench.report.sections import Tiling

    mix = instruction_mix((SM90 / "dot_tf32_atomic_sm90_w1.ptx").read_text())
    stored = json.loads(json.dumps(mix.model_dump(mode="json")))
    tiling = Tiling(stages={"mm": {"kernel": "k", "instructions": stored}, "lib": {"kernel": None}})
    assert tiling.instructions() == [
        (
            "mm",
            "mma m16n8k8 f32.tf32.tf32.f32 x32; global loads: ld 4 B x64; global stores: st 4 B x32; 1 global atomic "
            "(1 predicated to one thread); "
            "32 special-function instructions",
        )
    ]


def test_a_report_with_the_mix_keeps_the_contract(tmp_path: Path) -> None:
    """The H100 run of matmul v2 rendered again with its tiling record and its kernel's mix: the line follows the
    Tiling table, and the report passes the contract checker."""
    import json

    from kbench.report.models import ProfileResult
    from kbench.report.render import render_report
    from kbench.report.sections import Tiling
    from tests.conftest import contract_problems

    run = EXAMPLES / "event-matmul-v2"
    result = ProfileResult.model_validate_json((run / "result.json").read_text())
    mix = instruction_mix((run / "compiled" / "mm" / "mm_kernel.ptx").read_text()).model_dump(mode="json")
    tiling = Tiling(stages={"mm": {**json.loads((run / "tiling" / "mm.json").read_text()), "instructions": mix}})
    text = render_report(result.model_copy(update={"sections": result.sections.model_copy(update={"tiling": tiling})}))
    line = (
        "- mm: wgmma m64n256k16 f32.bf16.bf16 x4 (A from shared memory); global loads: cp.async 16 B x36; global "
        "stores: st 16 B x16"
    )
    assert f"\n\nInstructions (the compiled kernel's PTX, each counted once as written):\n{line}" in text
    (tmp_path / "report.md").write_text(text)
    assert contract_problems(tmp_path / "report.md") == []


def test_the_h100_mla_decode_kernels() -> None:
    """The attention kernels' two products: four warpgroup MMAs 256 wide and 72 only 32 wide, all bf16; ptxas's
    two spilled registers of v2 do not show in PTX (no local-memory instruction)."""
    for name, stores in (("mla_v2_fused_kernel", {16: 16}), ("mla_v3_partial_kernel", {4: 2, 16: 32})):
        mix = instruction_mix((DATA / "ptx_h100" / f"{name}.ptx").read_text())
        assert [(o.shape, o.count) for o in mix.tensor_ops] == [("m64n256k16", 4), ("m64n32k16", 72)]
        assert mix.operand_precision == "bf16" and mix.local == 0
        assert mix.cp_async == {16: 36} and mix.global_loads == {16: 18} and mix.global_stores == stores
    combine = instruction_mix((DATA / "ptx_h100" / "mla_v3_combine_kernel.ptx").read_text())
    assert combine.line() == (
        "no tensor-core instruction; global loads: ld 4 B x3, 16 B x2; global stores: st 16 B x1; "
        "4 float conversions; 1 special-function instruction"
    )


def test_where_each_warpgroup_mma_reads_its_a_operand() -> None:
    """P @ V keeps P (A) in registers, Q @ K^T reads both operands through shared-memory descriptors; mma.sync has
    no such operand form."""
    mix = instruction_mix((DATA / "ptx_h100" / "mla_v2_fused_kernel.ptx").read_text())
    assert [(o.shape, o.a_from, o.precision) for o in mix.tensor_ops] == [
        ("m64n256k16", "registers", "bf16"),
        ("m64n32k16", "shared", "bf16"),
    ]
    (sync,) = instruction_mix((SM90 / "dot_tf32_atomic_sm90_w1.ptx").read_text()).tensor_ops
    assert sync.op == "mma" and sync.a_from == ""
