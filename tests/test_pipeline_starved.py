"""Gluon kernels as kbench reads them, on real H100 captures of mla_decode v7 and v8 (tests/data/validation_h100_gluon):
the mbarrier wait as a line (not its retry loop's integer arithmetic), the pipeline-starvation item and its guards,
the PTX mix's wgmma operand sources and mbarrier waits, and v8's warp-specialized partitions (the warps in no
partition left out of the stall shares). The before/after pair itself is in test_diagnosis.PAIRS."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kbench.analysis import figures
from kbench.analysis.catalogue import lines, pipeline, stalls
from kbench.analysis.catalogue.evidence import Evidence
from kbench.analysis.lines import Line
from kbench.analysis.ptx import instruction_mix
from kbench.analysis.ttgir import idle_warps, partition_warps, partitions
from tests.conftest import DATA
from tests.test_diagnosis import top

RUNS = DATA / "validation_h100_gluon"
BEFORE = "h100_gluon/mla_decode-v7_fa3"


def test_the_wait_line_reads_as_an_mbarrier_wait_not_its_retry_loops_arithmetic() -> None:
    # the opcodes ncu counted on v7_fa3's wait line (its source/attention.md), the try-wait kept with its modifier
    x = Line(file="v7.py", line=145, code="mbarrier.wait(...)", instructions=451584.0, samples=4305.0,
             opcodes={"SHF": 129024.0, "IADD3": 64512.0, "SGXT": 64512.0, "IMAD": 64512.0,
                      "SYNCS.PHASECHK": 64512.0, "BRA": 64512.0}, stalls={"long_scoreboard": 3700.0})  # fmt: skip
    found = lines.cause(x)
    assert found is not None and found.what.startswith("an mbarrier wait (SYNCS.PHASECHK")
    no_wait = Line(file="v7.py", line=1, code="", instructions=1.0, samples=1.0, opcodes={"SHF": 2.0, "IADD3": 1.0})
    assert (c := lines.cause(no_wait)) is not None and c.what.startswith("integer index arithmetic")


def test_the_starved_pipeline_is_top1_and_its_stall_is_not_said_twice(tmp_path: Path) -> None:
    opps, _ = top(BEFORE, "annotation", tmp_path)
    first = opps[0]
    assert first.metric == "attention.mbarrier_wait_share" and first.value == "21.7%"
    assert "line v7.py:145 `mbarrier.wait(bars.index(1 + nxt), ((j + 1) // 2) & 1)`" in first.name
    assert "229912 of the 233472 bytes of shared memory" in (first.change or "")
    assert not any(o.metric == "attention.stall_long_scoreboard" for o in opps)  # the wait's samples, named once


def test_a_memory_bound_stage_waiting_on_its_copies_gets_no_pipeline_item(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Evidence, "memory_limited", property(lambda self: True))  # the copies are the work there
    opps, _ = top(BEFORE, "annotation", tmp_path)
    assert not any(o.metric.endswith("mbarrier_wait_share") for o in opps)


def test_a_short_wait_is_no_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "WAIT_SHARE", 0.25)  # v7_fa3's wait holds 21.7% of the samples
    opps, _ = top(BEFORE, "annotation", tmp_path)
    assert not any(o.metric.endswith("mbarrier_wait_share") for o in opps)
    assert opps[0].name.startswith("Narrow tensor tiles in attention: wgmma m64n32k16")


def test_the_ptx_mix_says_where_wgmma_reads_a_and_counts_mbarrier_waits() -> None:
    ptx = (RUNS / "mla_decode-v7" / "annotation" / "compiled" / "attention" / "mla_v7_kernel.ptx").read_text()
    line = instruction_mix(ptx).line()
    assert line.startswith(
        "wgmma m64n256k16 f32.bf16.bf16 x8 (A from shared memory), wgmma m64n32k16 f32.bf16.bf16 x72 (A from shared "
        "memory); global loads: TMA x8"
    )
    assert line.endswith("; 3 mbarrier waits")  # the Q load's and the two stages' (each once, as written)


V8 = RUNS / "mla_decode-v8"


def test_a_warp_specialized_kernels_partitions_are_read_from_its_ttgir() -> None:
    ttgir = (V8 / "event" / "compiled" / "attention" / "mla_v8_kernel.ttgir").read_text()
    parts = partitions(ttgir)
    assert parts == {"default_warps": 4, "workers": [{"warps": 4, "registers": 240}, {"warps": 1, "registers": 24}]}
    assert (
        idle_warps(partition_warps(parts), 12) == 3
    )  # Triton launched 12 warps (whole warpgroups) for 9 partition warps
    v7 = (RUNS / "mla_decode-v7" / "annotation" / "compiled" / "attention" / "mla_v7_kernel.ttgir").read_text()
    assert partitions(v7) is None and idle_warps(partition_warps(None), 8) is None
    report = (V8 / "annotation" / "report.md").read_text()  # written on the H100 by this code
    assert (
        "; warp-specialized: default partition 4 warps, workers 4 warps (240 registers), 1 warp (24 registers); "
        "3 warps in no partition (the launch is whole warpgroups)" in report
    )
    assert (
        "| attention | mla_v8_kernel | BLOCK_M=64, BLOCK_N=64, num_warps=4, REGS=240 | 4, 32, 1 | 12 | n/a |" in report
    )


def test_the_mix_counts_each_wgmma_shape_by_where_it_reads_a() -> None:
    line = instruction_mix((V8 / "event" / "compiled" / "attention" / "mla_v8_kernel.ptx").read_text()).line()
    assert line.startswith(  # Q.K^T: the latent half from shared memory, the rotary half from registers
        "wgmma m64n256k16 f32.bf16.bf16 x8 (A from registers), wgmma m64n64k16 f32.bf16.bf16 x4 (A from registers), "
        "wgmma m64n64k16 f32.bf16.bf16 x32 (A from shared memory)"
    )


def test_the_warps_in_no_partition_are_no_barrier_stall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # v8's 3 idle warps wait at a barrier on the kernel's def line for the whole run: 57% of its barrier samples
    opps, _ = top("h100_gluon/mla_decode-v8", "annotation", tmp_path)
    assert opps[0].metric == "attention.stall_long_scoreboard" and "an mbarrier wait" in opps[0].name
    barrier = next(o for o in opps if o.metric == "attention.stall_barrier")
    assert "2.2 of 7.2 stalled warps per issued instruction, 31%" in barrier.name
    monkeypatch.setattr(stalls, "idle_share", lambda e, reason: 0.0)  # counted as before: the idle warps' barrier
    counted, _ = top("h100_gluon/mla_decode-v8", "annotation", tmp_path)
    assert counted[0].metric == "attention.stall_barrier" and "5.1 of 10.1" in counted[0].name


@pytest.mark.slow
def test_a_wait_one_partition_alone_could_hold_is_no_starvation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # v8's largest wait holds 7.5% of the samples, under what its 1-warp copying partition of 12 warps holds (8.3%)
    monkeypatch.setattr(pipeline, "WAIT_SHARE", 0.05)
    opps, _ = top("h100_gluon/mla_decode-v8", "annotation", tmp_path)
    assert not any(o.metric.endswith("mbarrier_wait_share") for o in opps)
    monkeypatch.setattr(figures, "partition_warps", lambda parts: ())  # read without partitions, it would be named
    named, _ = top("h100_gluon/mla_decode-v8", "annotation", tmp_path)
    assert any(o.metric.endswith("mbarrier_wait_share") for o in named)


# what only a Triton kernel has: its tl.* calls, its compiler's pipelining and tuning knobs, its debug barrier
TRITON_ONLY = re.compile(r"\btl\.|num_stages|autotun|triton\.Config|debug_barrier|\bTriton (?:then|emits?|splits)")
GLUON_RUNS = ["h100_gluon/mla_decode-v7_fa3", "h100_gluon/mla_decode-v7", "h100_gluon/mla_decode-v8"]


@pytest.mark.parametrize("run", GLUON_RUNS)
def test_a_gluon_kernels_items_name_its_own_levers_at_lines_that_execute(run: str, tmp_path: Path) -> None:
    opps, _ = top(run, "annotation", tmp_path)
    tiling = json.loads((RUNS / run.split("/")[1] / "annotation" / "tiling" / "attention.json").read_text())
    assert tiling.get("language") in ("gluon", None)  # v7's records predate the field: read from its source lines
    for o in opps:
        said = f"{o.name} {o.change or ''}"
        assert not TRITON_ONLY.search(said), said
        assert set(re.findall(r"\bBLOCK_\w+", said)) <= set(tiling["config"]), said  # its own constexprs only
        assert "`def " not in said and not (o.code or "").startswith("def "), said  # a line that executes
        if o.line is not None:
            assert f"{o.file}:{o.line}" in said


def test_a_wait_for_the_other_warpgroup_names_its_barrier_and_the_arrive_not_a_copy(tmp_path: Path) -> None:
    opps, _ = top("h100_gluon/mla_decode-v8", "annotation", tmp_path)
    first = opps[0]
    assert first.metric == "attention.stall_long_scoreboard"
    # v8.py as captured (its source in the .ncu-rep): the wait on X_SUM at 86, the second warpgroup's arrive at 92
    assert (
        "the line is an mbarrier wait (SYNCS.PHASECHK in a retry loop) on the mbarrier `bars.index(X_SUM)`, which "
        "other warps' arrive completes (v8.py:92 `mbarrier.arrive(bars.index(X_SUM))`)" in first.name
    )
    assert "warps wait at an mbarrier for its phase to complete" in first.name
    assert "copy" not in (first.change or "").split("; carried")[0]
    assert (first.file, first.line, first.code) == ("v8.py", 86, "mbarrier.wait(bars.index(X_SUM), j & 1)")
    barrier = next(o for o in opps if o.metric == "attention.stall_barrier")  # the MMA lines, not the def line
    assert barrier.line == 81 and (barrier.code or "").startswith("sc = warpgroup_mma(qn, kv.permute((1, 0))")
    assert "gl.thread_barrier" in (barrier.change or "") and "BLOCK_M=64, BLOCK_N=64" in (barrier.change or "")


def test_a_wait_for_copies_names_its_barrier_and_the_copies(tmp_path: Path) -> None:
    opps, _ = top(BEFORE, "annotation", tmp_path)
    first = opps[0]
    assert first.name.startswith(
        "Pipeline starved in attention: warps wait for the asynchronous copies (TMA) that fill their next stage, at "
        "the mbarrier `bars.index(1 + nxt)`, which TMA copies complete (v7.py:62 `mbarrier.expect(bar, "
    )
    assert (first.file, first.line) == ("v7.py", 145)
