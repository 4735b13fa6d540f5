"""What the compiled kernel executes, read from Triton's TTGIR (tests/data/ttgir_triton39_sm90: kernels Triton 3.9
lowered for sm_90 on a CPU): atomics per program (a scalar one once, a block's once per element, times the loop's
trips), one address or not, the float max lowered to two exclusive ops; each dot's accumulator layout and the copies
the warps make of it; and in the PTX, the atomics predicated to one thread."""

from __future__ import annotations

from kbench.analysis.ptx import instruction_mix
from kbench.analysis.ttgir import atomics, compiled_facts, dots
from tests.conftest import DATA

TTGIR = DATA / "ttgir_triton39_sm90"


def read(name: str) -> str:
    return (TTGIR / name).read_text()


def test_a_block_atomic_runs_once_per_element_and_a_scalar_once_per_program() -> None:
    (block,) = atomics(read("per_element.ttgir"))
    assert (block.op, block.line, block.scalar, block.elements, block.trips) == (
        "fadd",
        "_common.py:23",
        False,
        1024,
        1,
    )
    assert block.masked and block.one_address and block.per_program == 1024  # out_ptr + zeros: out_ptr splat
    (scalar,) = atomics(read("per_cta.ttgir"))
    assert (scalar.line, scalar.scalar, scalar.per_program, scalar.masked) == ("_common.py:21", True, 1, False)
    assert scalar.one_address
    for name in ("scalar_atomic_per_program", "scalar_atomic_wide"):  # 32 elements on 1 warp, 4096 on 8
        (one,) = atomics(read(f"{name}.ttgir"))
        assert one.scalar and one.per_program == 1 and one.one_address and one.line == "_common.py:19"


def test_a_float_atomic_max_is_two_exclusive_ops_and_one_atomic() -> None:
    # tl.atomic_max on a float: a signed max where the sign bit is clear, an unsigned min where set (masks cmpi eq /
    # cmpi ne on the same operands): exactly one runs, not "at most"
    (at_one,) = atomics(read("absmax_fused.ttgir"))
    assert at_one.lowered == 2 and at_one.op == "max/umin" and at_one.per_program == 1 and at_one.one_address
    assert not at_one.masked and at_one.line == "_common.py:21"
    (by_program,) = atomics(read("max_mod.ttgir"))
    assert by_program.address == ["program"] and not by_program.one_address  # out_ptr + pid % 4


def test_loops_repeat_atomics_by_their_constant_trips_and_unknown_otherwise() -> None:
    block, scalar = atomics(read("loops.ttgir"))
    assert block.trips == 8 and block.per_program == 8 * 128 and block.address == ["lanes"]
    assert scalar.trips is None and scalar.per_program is None and scalar.address == ["loop"]  # range(n)


def test_the_ptx_counts_the_atomics_predicated_to_one_thread() -> None:
    # `@%p atom` with %p = setp.eq (%tid.x [& mask >= the CTA's threads]), 0, alone or and-ed (the float max)
    names = ("per_element", "per_cta", "scalar_atomic_per_program", "absmax_fused")
    counts = {n: instruction_mix(read(f"{n}.ptx")) for n in names}
    assert (counts["per_element"].atomics, counts["per_element"].one_thread_atomics) == (8, 0)
    assert (counts["per_cta"].atomics, counts["per_cta"].one_thread_atomics) == (1, 1)
    one_warp = counts["scalar_atomic_per_program"]
    assert (one_warp.atomics, one_warp.one_thread_atomics) == (1, 1)  # tid & 31 on 32 threads
    assert (counts["absmax_fused"].atomics, counts["absmax_fused"].one_thread_atomics) == (2, 2)


def test_dot_layouts_say_which_products_the_warpgroups_copy() -> None:
    # chain split: the scores (64 x 64) over warpsPerCTA [8, 1]: two warpgroups for 64 rows, each computes it whole;
    # P.V (64 x 128, A in registers) over [4, 2]: split. On 4 warps nothing is copied
    split = dots(read("chain_split.ttgir"))
    assert [(d.m, d.n, d.k, d.warps, d.copies, d.a_registers) for d in split] == [
        (64, 64, 128, [8, 1], 2, False),
        (64, 64, 64, [8, 1], 2, False),
        (64, 128, 64, [4, 2], 1, True),
    ]
    assert all(d.version == 3 and d.line.startswith("_triton.py:") for d in split)
    assert all(d.copies == 1 for d in dots(read("chain_whole.ttgir")))
    assert [d.copies for d in dots(read("mla_v2_d512.ttgir"))] == [2, 2, 1]


def test_the_tiling_record_keeps_the_facts_or_none_without_a_ttgir() -> None:
    facts = compiled_facts(read("per_cta.ttgir"))
    assert isinstance(facts["atomics"], list) and facts["atomics"][0]["scalar"] is True and facts["dots"] == []
    assert compiled_facts(None) == {"atomics": None, "dots": None, "partitions": None}


def test_the_tiling_record_gets_them_from_the_compiled_kernel() -> None:
    # kernel_facts on a CompiledKernel's surface (metadata, asm, the cubin's registers): the TTGIR's and the PTX's facts
    from types import SimpleNamespace

    from kbench.capture.artifacts import kernel_facts

    meta = SimpleNamespace(name="atomic_sum_kernel", num_warps=4, num_stages=3, shared=2048)
    asm = {"ttir": "", "ptx": read("per_cta.ptx"), "ttgir": read("per_cta.ttgir")}
    compiled = SimpleNamespace(metadata=meta, asm=asm, _init_handles=lambda: None, n_regs=24, n_spills=0)
    facts = kernel_facts(compiled)
    assert facts["atomics"][0]["scalar"] is True and facts["atomics"][0]["line"] == "_common.py:21"
    assert facts["instructions"]["one_thread_atomics"] == 1 and facts["dots"] == []
    assert facts["language"] == "triton" and facts["num_stages"] == 3
    # a Gluon kernel: compiled from its own TTGIR (no TTIR), pipelined by hand: num_stages does not apply
    gluon = SimpleNamespace(metadata=meta, asm={k: v for k, v in asm.items() if k != "ttir"},
                            _init_handles=lambda: None, n_regs=24, n_spills=0)  # fmt: skip
    assert kernel_facts(gluon)["language"] == "gluon" and kernel_facts(gluon)["num_stages"] is None


def test_an_atomic_under_a_branch_runs_at_most_its_count() -> None:
    # the TTGIR Triton 3.9 writes for `if pid == 0: tl.atomic_add(out, 1.0)` (an scf.if around the atomic)
    text = """
  tt.func public @k(%out_ptr: !tt.ptr<f32> loc("out_ptr"(#loc))) attributes {noinline = false} {
    %cst = arith.constant 1.000000e+00 : f32 loc(#loc1)
    %true = arith.constant true loc(#loc1)
    %c0_i32 = arith.constant 0 : i32 loc(#loc1)
    %pid = tt.get_program_id x : i32 loc(#loc2)
    %0 = arith.cmpi eq, %pid, %c0_i32 : i32 loc(#loc3)
    scf.if %0 {
      %1 = tt.atomic_rmw fadd, acq_rel, gpu, %out_ptr, %cst, %true : (!tt.ptr<f32>, f32, i1) -> f32 loc(#loc4)
    } loc(#loc3)
    tt.return loc(#loc)
  } loc(#loc)
#loc4 = loc("k.py":7:9)
"""
    (one,) = atomics(text)
    assert one.masked and one.scalar and one.per_program == 1 and one.one_address and one.line == "k.py:7"
