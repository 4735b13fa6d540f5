"""What the compiled kernel executes, read from Triton's TTGIR (tests/data/ttgir_triton39_sm90: kernels Triton 3.9
lowered for sm_90 on a CPU): atomics per program (a scalar one once, a block's once per element, times the loop's
trips), one address or not, the float max lowered to two exclusive ops; each dot's accumulator layout and the copies
the warps make of it; and in the PTX, the atomics predicated to one thread."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kbench.analysis import ttgir
from kbench.analysis.ptx import instruction_mix
from kbench.analysis.ttgir import AtomicOp, atomics, compiled_facts, dots
from tests.conftest import DATA
from tests.faults.helpers import kbench
from tests.work_counter import lines_run

LOC_DEF = re.compile(r"^(#loc\d*)\s*=\s*(.*)$")

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
    assert compiled_facts(None) == {"atomics": None, "dots": None, "partitions": None, "loop_barriers": None}


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


# --- loc aliases resolved once each (issue 50): a few bytes of hostile TTGIR cost no more than their size --------

HOSTILE = """#loc1 = loc(callsite(#loc1 at #loc1))
module {
  tt.func public @k(%p: !tt.ptr<f32>) {
    %c = arith.constant 1.0 : f32 loc(#loc1)
    %0 = tt.atomic_rmw fadd, acq_rel, gpu, %p, %c : (!tt.ptr<f32>, f32) -> f32 loc(#loc1)
    tt.return loc(#loc1)
  } loc(#loc1)
}
"""


def _atomic_at(locs: list[str], head: str) -> str:
    """A kernel of one atomic whose loc is ``head``, with the loc definitions ``locs``."""
    return "\n".join([*locs, HOSTILE.split("\n", 1)[1].replace("#loc1", head)])


def _lines(text: str, budget: int = 50_000) -> tuple[list[AtomicOp], int]:
    return lines_run(lambda: atomics(text), (ttgir,), budget)


def test_a_loc_that_calls_itself_resolves_to_unknown_at_once() -> None:
    # the reviewer's file: #loc1 = loc(callsite(#loc1 at #loc1)) ran for hours (x2.3 a hop, 2^33 calls)
    assert len(HOSTILE.encode()) < 300
    (one,), _ = _lines(HOSTILE, budget=5_000)  # a few hundred lines: parsed, and the alias met once
    assert one.line == "?" and one.op == "fadd"
    # a loop through others, and an alias that leads into a loop: unknown too; the loop is never followed around
    loop = ["#loc1 = loc(callsite(#loc2 at #loc3))", '#loc2 = loc("n"(#loc1))', '#loc3 = loc("k.py":3:1)']
    assert _lines(_atomic_at(loop, "#loc1"))[0][0].line == "?"
    assert _lines(_atomic_at([*loop, '#loc4 = loc("m"(#loc1))'], "#loc4"))[0][0].line == "?"


def test_a_diamond_of_inlined_calls_is_resolved_once_per_alias() -> None:
    # each alias an inlined call whose callee and call site are both the next, down to a line of Triton's library
    # (so that each call site is followed as well as its callee): no loop, 2^depth paths, depth aliases
    def diamond(depth: int) -> str:
        locs = [f"#loc{k} = loc(callsite(#loc{k + 1} at #loc{k + 1}))" for k in range(1, depth)]
        return _atomic_at([*locs, f'#loc{depth} = loc("/x/triton/language/core.py":{depth}:1)'], "#loc1")

    (one,), small = _lines(diamond(16))
    (two,), large = _lines(diamond(32))
    assert (one.line, two.line) == ("triton/core.py:16", "triton/core.py:32")
    assert large < 2.5 * small  # twice the aliases: about twice the work (the old resolver: 65,536 times)


def test_a_chain_of_locs_costs_its_length_and_past_the_bound_resolves_to_unknown() -> None:
    def chain(length: int) -> str:
        locs = [f'#loc{k} = loc("n{k}"(#loc{k + 1}))' for k in range(1, length)]
        return _atomic_at([*locs, f'#loc{length} = loc("k.py":7:1)'], "#loc1")

    assert _lines(chain(ttgir.MAX_LOC_DEPTH))[0][0].line == "k.py:7"
    (deep,), small = _lines(chain(2_000), budget=2_000_000)
    _, large = _lines(chain(4_000), budget=2_000_000)
    assert deep.line == "?"  # deeper than any compiler nests a location: not followed to its end
    assert large < 2.5 * small


def test_every_real_kernels_locations_resolve_as_they_are_written() -> None:
    # every alias of every TTGIR in tests/data against the definition followed literally (a callsite: the callee's
    # line unless it is Triton's own, else the call site; a named loc: the loc it names), which ends on real files
    files = sorted(DATA.rglob("*.ttgir"))
    assert len(files) > 50
    for path in files:
        locs = {m[1]: m[2] for line in path.read_text().splitlines() if (m := LOC_DEF.match(line.strip()))}

        def literal(ref: str, locs: dict[str, str] = locs) -> str | None:
            text = locs.get(ref, "")
            if call := re.match(r"loc\(callsite\((#loc\d*) at (#loc\d*)\)\)", text):
                callee = literal(call[1])
                return callee if callee is not None and not callee.startswith("triton/") else literal(call[2])
            if f := re.search(r"\"([^\"]+)\":(\d+):\d+", text):
                name = f[1].rsplit("/", 1)[-1]
                return f"triton/{name}:{f[2]}" if "/triton/" in f[1] else f"{name}:{f[2]}"
            nxt = re.search(r"#loc\d*", text)
            return literal(nxt[0]) if nxt else None

        resolved = ttgir.resolve_locs(locs)
        assert resolved == {ref: literal(ref) for ref in locs}, path
        assert sum(v is not None for v in resolved.values()) > len(locs) // 2, path


@pytest.mark.slow
def test_analyze_of_a_capture_beside_the_hostile_ttgir_ends(tmp_path: Path) -> None:
    # the review's attack end to end: a run folder whose launch record predates the TTGIR's facts, so that analyze
    # reads compiled/<stage>/<kernel>.ttgir beside the capture (it ran for hours; 2.2 s without the file)
    run = tmp_path / "run"
    shutil.copytree(DATA / "examples_h100_1122" / "nsys-vector_add-base-fallback", run)
    (run / "compiled" / "add").mkdir(parents=True)
    (run / "compiled" / "add" / "add_kernel.ttgir").write_text(HOSTILE)
    done = kbench("analyze", str(run / "pytorch_trace.json"), "--out", str(tmp_path / "out"), timeout=120)
    assert done.code == 0, done.stderr


@pytest.mark.timeout(20)  # a hang guard: the regular expression it replaces took 69 s on 100 KB, ~4.6 min on 200 KB
def test_a_long_run_of_spaces_costs_its_length_not_its_square() -> None:
    """A .ttgir line holding a long run of spaces (a planted compiled/ file beside a capture): the trailing loc(...)
    is found in one scan from the line's end, so the work grows with the line, whatever it holds."""
    line = lambda n: " %0 = arith.addi" + " " * n + "x loc(#loc3)"  # noqa: E731

    def work(n: int) -> int:
        text = f"module {{\n tt.func @k() {{\n{line(n)}\n }}\n}}\n"
        return lines_run(lambda: compiled_facts(text), (ttgir,))[1]

    assert ttgir._clean(line(200_000)) == "%0 = arith.addi" + " " * 200_000 + "x"
    small, large = work(1_000), work(8_000)
    assert large <= 1.2 * small + 100  # the scan stops at the loc's opening parenthesis: the spaces are never walked
