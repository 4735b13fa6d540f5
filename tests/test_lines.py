"""Time by source line (analysis/lines.py, opcodes.py) and the advice built on it (catalogue/lines.py, the stall
items): from the real H100 captures (ncu source counters, PTX) where they exist; the kernels whose one line holds the
time (issue 42's unseen pairs) from per-SASS rows written in ncu_source.sass_rows' format, with real SASS text."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kbench import ncu_preload, pipeline
from kbench.analysis import lines, ncu, ncu_source
from kbench.analysis import opcodes as oc
from kbench.analysis import opportunities as op
from kbench.analysis.catalogue.lines import cause
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.modes.base import Context
from kbench.modes.event import EVENT
from kbench.plan.discovery import load_version
from tests.conftest import DATA

REPS = DATA / "ncu_h100"
ROOF = Ceilings(tflops=50.0, gbps=4000.0, source="test")
KERNEL = "/w/k.py"
SOURCE = {
    KERNEL: [
        "def kernel(x, y, n, d, BLOCK: tl.constexpr):",
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
        "    v = tl.load(x + offs)",
        "    for i in range(0, n):",
        "        v = tl.exp(v) / (1.0 + tl.exp(v))",
        "        idx = offs // d",
        "    tl.store(y + offs, v)",
    ]
}


def row(line: int, sass: str, executed: float, stalls: dict[str, float] | None = None) -> dict[str, Any]:
    """One SASS instruction as ncu_source.sass_rows gives it."""
    by = stalls or {}
    top = max(by, key=by.__getitem__) if by else ""
    return {"pc": "0x0", "file": KERNEL, "line": line, "sass": sass, "inst_executed": executed,
            "stall_samples": sum(by.values()), "top_stall": top, "stalls": by}  # fmt: skip


# a kernel whose loop line computes a sigmoid with two exponentials and a division: 94% of its samples there
SFU_ROWS = [
    row(2, "S2R R0, SR_CTAID.X", 1e3),
    row(3, "LDG.E.128 R4, desc[UR4][R2.64]", 1e3, {"long_scoreboard": 20}),
    row(4, "ISETP.GE.AND P0, PT, R9, UR6, PT", 2e5, {"wait": 10}),
    row(5, "FMUL R5, R4, 1.4426950216293334961", 4e5, {"wait": 30}),
    row(5, "MUFU.EX2 R6, R5", 4e5, {"mio_throttle": 700, "short_scoreboard": 150, "selected": 50}),
    row(5, "FADD R7, R6, 1", 2e5, {"short_scoreboard": 40}),
    row(5, "MUFU.RCP R8, R7", 2e5, {"mio_throttle": 300}),
    row(5, "FFMA R4, R6, R8, RZ", 2e5, {"wait": 20}),
    row(7, "@!P0 STG.E.128 desc[UR4][R2.64], R4", 1e3, {"drain": 10}),
]
# ptxas's expansion of `offs // d` with d a run-time argument
DIVISION_ROWS = [
    row(6, "I2F.U32.RP R3, R2", 1e5),
    row(6, "MUFU.RCP R3, R3", 1e5, {"mio_throttle": 200}),
    row(6, "IADD3 R4, R3, 0xffffffe, RZ", 1e5),
    row(6, "F2I.FTZ.U32.TRUNC.NTZ R5, R4", 1e5, {"short_scoreboard": 100}),
    row(6, "IMAD.HI.U32 R6, R5, R7, R4", 2e5, {"wait": 100}),
    row(6, "ISETP.GE.U32.AND P1, PT, R8, R2, PT", 2e5, {"wait": 50}),
    row(3, "LDG.E R4, desc[UR4][R2.64]", 1e5, {"long_scoreboard": 40}),
]


def evidence(us: float = 1000.0, flops: float = 1e10, **kw: Any) -> op.Evidence:
    """A compute-limited fp32 stage: ``flops`` at 50 TFLOP/s is 200 us of its ``us`` (the distance: 80%)."""
    f = StageFigures(name="s", precision="fp32", flops=flops, dram_bytes=1e6, timing=TimingStats.of([us]),
                     duration_us=us, tflops=None, gbps=None, intensity=flops / 1e6, bottleneck="Compute")  # fmt: skip
    return op.Evidence(stage=f, total_us=us, practical=ROOF, **kw)


def test_opcodes_map_to_their_pipes() -> None:
    sass = [
        ("@!P0 MUFU.EX2 R3, R2", "MUFU.EX2", "xu"),
        ("I2F.U32.RP R3, R2", "I2F", "conversion"),
        ("F2I.FTZ.U32.TRUNC.NTZ R5, R4", "F2I", "conversion"),
        ("F2FP.BF16.F32.PACK_AB R0, R1, R2", "F2FP", "conversion"),
        ("IMAD.HI.U32 R6, R5, R7, R4", "IMAD.HI", "alu"),
        ("IADD3 R4, R3, 1, RZ", "IADD3", "alu"),
        ("LOP3.LUT R0, R0, 0x1fc, RZ, 0xc0, !PT", "LOP3", "alu"),
        ("SHF.R.U32.HI R1, RZ, 0x2, R0", "SHF", "alu"),
        ("FFMA R4, R6, R8, RZ", "FFMA", "fma"),
        ("FADD R4, R4, 1", "FADD", "fma"),
        ("FMUL R5, R4, 2", "FMUL", "fma"),
        ("LDG.E.128 R4, desc[UR4][R2.64]", "LDG", "lsu"),
        ("STS.128 [R1], R4", "STS", "lsu"),
        ("LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R4.64]", "LDGSTS", "lsu"),
        ("ATOM.E.ADD.F32.FTZ.RN.STRONG.GPU PT, R5, desc[UR4][R2.64], R4", "ATOM.E", "lsu"),
        ("RED.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR4][R2.64], R4", "RED.E", "lsu"),
        ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24", "HGMMA", "tensor"),
        ("HMMA.16816.F32.BF16 R4, R8, R12, R4", "HMMA", "tensor"),
        ("BAR.SYNC.DEFER_BLOCKING 0x0", "BAR.SYNC", "barrier"),
        ("UIADD3 UR4, UR4, 0x1, URZ", "UIADD3", "uniform"),
        ("DFMA R2, R4, R6, R2", "DFMA", "fp64"),
    ]
    for text, name, pipe in sass:
        assert (oc.sass_opcode(text), oc.pipe(oc.sass_opcode(text))) == (name, pipe), text
    ptx = [
        ("ex2.approx.f32", "ex2", "xu"),
        ("rcp.rn.f32", "rcp", "xu"),
        ("cvt.rn.f32.s32", "cvt.f32.s32", "conversion"),
        ("cvt.u32.u64", "cvt.u32.u64", "alu"),
        ("div.s32", "div.s32", "alu"),
        ("fma.rn.f32", "fma.f32", "fma"),
        ("mad.lo.s32", "mad.s32", "alu"),
        ("add.f64", "add.f64", "fp64"),
        ("ld.global.v4.b32", "ld.global", "lsu"),
        ("atom.global.gpu.acq_rel.add.f32", "atom.global", "lsu"),
        ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "wgmma", "tensor"),
        ("bar.sync", "bar", "barrier"),
        ("max.f32", "max.f32", "fma"),
    ]
    for name, kept, pipe in ptx:
        assert (oc.ptx_opcode(name), oc.pipe(oc.ptx_opcode(name))) == (kept, pipe), name
    assert oc.is_division({"I2F": 1, "MUFU.RCP": 1, "IMAD.HI": 2}) and oc.is_division({"rem.u32": 1})
    assert not oc.is_division({"MUFU.RCP": 1, "FFMA": 2}) and not oc.is_division({"div.f32": 1})


def test_the_line_model_of_a_real_ncu_capture_adds_up() -> None:
    # full_mm.ncu-rep (ncu --set full --import-source yes, a Triton bf16 matmul on the H100): 388 SASS instructions
    # on 8 lines; the instructions and samples summed by line are the kernel's own totals
    action = ncu.load_actions(REPS / "full_mm.ncu-rep")[0]
    m = ncu_source.line_model(action)
    assert m is not None and m.kernel == "mm_kernel" and not m.static and len(m.lines) == 8
    assert m.instructions == action.metric_by_name("smsp__inst_executed.sum").as_double() == 41361408
    assert m.samples == action.metric_by_name("smsp__pcsamp_sample_count").as_uint64() == 22735
    hot = m.hottest
    assert hot is not None and (hot.line, hot.code, hot.top_stall) == (
        16,
        "for k in range(0, K, BK):",
        "long_scoreboard",
    )
    assert m.sample_share(hot) == pytest.approx(9365 / 22735) and m.time_share(hot) == m.sample_share(hot)
    assert hot.opcodes["HGMMA"] == 524288 and hot.pipes["tensor"] == 532480 and "selected" not in hot.stalls
    a_load = next(x for x in m.lines if x.line == 17)
    assert a_load.opcodes["LDGSTS"] == 2162688 and a_load.opcodes["LDS"] == 1622016 and a_load.pipes["lsu"] > 0
    assert sum(m.sample_share(x) or 0 for x in m.lines) == pytest.approx(1.0)
    # the line that carries long_scoreboard: the loop's line, 85% of those samples
    ((carrier, share),) = m.carrying("long_scoreboard")
    assert carrier is hot and share == pytest.approx(7477 / sum(x.stalls.get("long_scoreboard", 0) for x in m.lines))


def test_source_counters_alone_give_the_model_and_a_short_list_none() -> None:
    # kbench's SASS warm-up report was captured with ncu's SourceCounters section only: per-line instructions come
    # from it (a tiny kernel: no sample fell on it, so the instructions weigh the lines)
    w = ncu_source.line_model(ncu.load_actions(ncu_preload.SASS_WARMUP)[0])
    assert w is not None and w.samples == 0 and w.hottest is not None and w.hottest.line == 7
    assert w.hottest.opcodes["FADD"] == 32 and w.time_share(w.hottest) == pytest.approx(84 / 128)
    # annotation mode's short list (before this collection) has no per-PC counts: no model, no source/<stage>.md
    short = ncu.load_actions(DATA / "kbench_h100" / "annotation_vector_add_base.ncu-rep")[0]
    assert ncu_source.line_model(short) is None
    # cuBLAS's kernel (sol_streams) carries no line information: no model, where add_kernel beside it has one
    streams = ncu.load_actions(REPS / "sol_streams.ncu-rep")
    assert [ncu_source.line_model(a) is None for a in streams[:2]] == [False, True]


def test_the_static_mix_of_real_ptx_finds_the_loops() -> None:
    # the matmul's PTX (event mode's compiled/mm): its K loop's lines hold the wgmma; an elementwise add has no loop
    (mm,) = lines.compiled(DATA / "examples_h100_1122" / "event-matmul-v2" / "compiled" / "mm")
    assert mm.static and mm.kernel == "mm_kernel" and mm.source == lines.STATIC
    assert mm.instructions == 921 and mm.looped == 133
    dot = next(x for x in mm.lines if x.opcodes.get("wgmma"))
    assert dot.looped == dot.instructions and dot.pipes["tensor"] == 7
    (add,) = lines.compiled(DATA / "examples_h100_1122" / "annotation-vector_add-base" / "compiled" / "add")
    assert add.looped == 0 and add.time_share(add.lines[0]) == 0.0
    # the MLA decode kernel: its softmax line's ex2 inside the loop, under v3.py's helper file
    ptx = (DATA / "ptx_h100" / "mla_v3_partial_kernel.ptx").read_text()
    mla = lines.from_ptx("partial", ptx, read=lambda f: [])
    soft = next(x for x in mla.lines if x.opcodes.get("ex2"))
    assert (Path(soft.file).name, soft.line, soft.opcodes["ex2"], soft.looped) == ("_triton.py", 61, 32, 64)


def test_a_sass_listing_with_line_info() -> None:
    # nvdisasm -g's format: "//## File" comments (an inlined frame under its call site, the PTX line skipped),
    # labels and a backward branch closing the loop
    listing = "\n".join([
        "        .text.k:",
        '        //## File "/w/k.py", line 3',
        "        /*0000*/                   LDG.E R4, desc[UR4][R2.64] ;",
        ".L_x_1:",
        '        //## File "/t/standard.py", line 40 inlined at "/w/k.py", line 5',
        '        //## File ".nv_debug_ptx_txt", line 77',
        "        /*0010*/                   MUFU.EX2 R6, R5 ;",
        "        /*0020*/                   FADD R7, R6, 1 ;",
        '        //## File "/w/k.py", line 4',
        "        /*0030*/              @P0   BRA `(.L_x_1) ;",
        '        //## File "/w/k.py", line 7',
        "        /*0040*/                   STG.E desc[UR4][R2.64], R7 ;",
        "        /*0050*/                   EXIT ;",
    ])  # fmt: skip
    m = lines.from_sass_listing("k", listing, read=SOURCE.get)  # type: ignore[arg-type]
    by = {x.line: x for x in m.lines}
    assert set(by) == {3, 4, 5, 7} and by[5].opcodes == {"MUFU.EX2": 1, "FADD": 1} and by[5].looped == 2
    assert by[4].looped == 1 and by[3].looped == 0 and by[7].looped == 0 and by[5].code.startswith("v = tl.exp(v)")
    assert m.lines[0] is by[5] and m.time_share(by[5]) == pytest.approx(2 / 3)


def test_the_stall_item_names_the_line_and_its_change_follows_the_opcodes() -> None:
    # issue 42's unseen pair: mio_throttle dominates and the special-function pipe is 87% busy; the item used to
    # advise on shared memory. Now it names the line that carries the reason and the special functions on it
    # (the pipe at 45%, under XU_BUSY_PCT: at 87% the pipe's own item takes the distance, below)
    model = lines.measured("k", SFU_ROWS, SOURCE)
    e = evidence(stalls={"mio_throttle": 5.0, "wait": 1.0}, pipes={"xu": 45.0, "fma": 30.0}, lines=model,
                 hot_lines=("k.py:5",))  # fmt: skip
    (stall, *_) = [o for o in op.diagnose(e) if o.metric == "s.stall_mio_throttle"]
    assert "special-function work (MUFU.EX2, MUFU.RCP)" in stall.name
    assert stall.change is not None and stall.change.startswith("fewer special functions per element")
    assert "k.py:5 `v = tl.exp(v) / (1.0 + tl.exp(v))` (100% of its samples; " in stall.change
    assert "MUFU.EX2 x400000 (special-function unit (XU))" in stall.change
    assert "bank conflicts" not in stall.change and "xu (special functions" in stall.change
    # the pipe at 87%, the busiest unit: its own item (issue 51) names the line and its time (87% of 1000 us, capped
    # at the 800-us distance), and the stall item is not said again over nothing left
    found = op.diagnose(replace(e, pipes={"xu": 87.0, "fma": 30.0}))
    (xu,) = [o for o in found if o.metric == "s.xu_pipe_pct"]
    assert xu.name.startswith("Special-function pipe (XU) at 87% of its peak in s, the busiest unit: its ")
    assert "k.py:5 `v = tl.exp(v) / (1.0 + tl.exp(v))` (MUFU.EX2 x400000, MUFU.RCP x" in xu.name
    assert xu.gain_pct == pytest.approx(80.0) and not any(o.metric == "s.stall_mio_throttle" for o in found)
    # without per-line samples, the special-function change only where its pipe is the busiest at XU_BUSY_PCT or
    # more (then the pipe's own item above speaks for it); under it, or another pipe busier, the reason's own change
    busy = next(
        o for o in op.diagnose(replace(e, lines=None, pipes={"xu": 49.0})) if o.metric == "s.stall_mio_throttle"
    )
    assert busy.change is not None and busy.change.startswith("fewer, wider shared-memory instructions")
    fma = replace(e, lines=None, pipes={"fma": 60.0, "xu": 20.0})
    plain = next(o for o in op.diagnose(fma) if o.metric == "s.stall_mio_throttle")
    assert plain.change is not None and plain.change.startswith("fewer, wider shared-memory instructions")


def test_the_hottest_line_is_an_item_when_nothing_explains_half_the_distance() -> None:
    model = lines.measured("k", SFU_ROWS, SOURCE)
    hot = model.hottest
    assert hot is not None and hot.line == 5 and model.sample_share(hot) == pytest.approx(1290 / 1330)
    found = op.diagnose(evidence(lines=model))  # no stall ratios: nothing named
    item = next(o for o in found if o.metric == "s.line_5_share")
    assert item.named and "holds 97% of k's stall samples and 87% of its instructions executed in s" in item.name
    assert (
        "`v = tl.exp(v) / (1.0 + tl.exp(v))`" in item.name
        and "MUFU.EX2 x400000 (special-function unit (XU))" in item.name
    )
    # its gain: the time the line holds (97% of 1000 us), capped by the distance to the roof (800 us of 1000)
    assert item.gain_pct == pytest.approx(80.0)
    assert item.change is not None and "tl.math.exp2(x * C)" in item.change and "source/s.md" in item.change
    rest = next((o for o in found if o.rest), None)
    assert rest is None  # the line holds the whole distance
    # a longer distance than the line holds: the line's 97% of the stage's time is the gain
    far = op.diagnose(evidence(lines=model, flops=1e8))
    assert next(o for o in far if o.metric == "s.line_5_share").gain_pct == pytest.approx(100 * 1290 / 1330)
    # integer division by a run-time value: the change is a constexpr divisor or a reciprocal, not the XU's
    div = lines.measured("k", DIVISION_ROWS, SOURCE)
    assert div.hottest is not None and div.hottest.line == 6
    c = cause(div.hottest)
    assert c is not None and c.what.startswith("integer division or modulo") and "tl.constexpr" in c.change


def test_no_line_item_on_a_healthy_kernel() -> None:
    model = lines.measured("k", SFU_ROWS, SOURCE)
    # at its roof: "stop" alone
    (stop,) = op.diagnose(evidence(lines=model, flops=4.9e10))
    assert stop.stop
    # within a quarter of its roof: the hot line is its work
    assert not any("line_" in o.metric for o in op.diagnose(evidence(lines=model, flops=4e10)))
    # named items explain half the distance or more: the stall item carries the line instead
    named = op.diagnose(evidence(lines=model, stalls={"mio_throttle": 5.0, "wait": 1.0}))
    assert not any("line_" in o.metric for o in named)
    # the real matmul: its hottest line holds 41% of the samples (a K loop at 76% of the roof): no line item
    from tests.test_ncu_analysis import analysed

    result = analysed(REPS / "full_mm.ncu-rep", "ncu", load_version("matmul").from_values({}))
    assert not any("line_" in o.metric for o in result.figures.opportunities)


PTX_LOOP = """
	.file	1 "/w/k.py"
	.loc	1 2 0
	mov.u32 	%r1, %ctaid.x;
	.loc	1 3 0
	ld.global.b32 	%r2, [%rd1];
$L__BB0_1:
	.loc	1 5 0
	mul.f32 	%f2, %f1, 0f3FB8AA3B;
	ex2.approx.f32 	%f3, %f2;
	add.f32 	%f4, %f3, 0f3F800000;
	rcp.rn.f32 	%f5, %f4;
	ex2.approx.f32 	%f6, %f2;
	cvt.rn.f32.s32 	%f7, %r3;
	.loc	1 4 0
	add.s32 	%r3, %r3, 1;
	setp.lt.s32 	%p1, %r3, %r4;
	@%p1 bra 	$L__BB0_1;
	.loc	1 7 0
	st.global.b32 	[%rd2], %r5;
	ret;
"""


def test_a_static_line_item_only_where_the_loop_is_costly() -> None:
    # event mode: a loop whose line is special functions and conversions explains an unexplained rest, said static
    model = lines.from_ptx("k", PTX_LOOP, read=SOURCE.get)  # type: ignore[arg-type]
    assert model.static and model.looped == 9 and model.lines[0].line == 5 and model.lines[0].looped == 6
    item = next(o for o in op.diagnose(evidence(lines=model)) if o.metric == "s.line_5_share")
    assert "(static)" in item.name and "67% of the instructions inside k's loops as written" in item.name
    assert item.change is not None and "lines/s.md" in item.change
    # the real MLA decode kernel: its softmax's ex2 is 9% of the loop's instructions: no static item, however
    # large the unexplained rest
    mla = lines.from_ptx("partial", (DATA / "ptx_h100" / "mla_v3_partial_kernel.ptx").read_text(), read=lambda f: [])
    assert not any("line_" in o.metric for o in op.diagnose(evidence(lines=mla)))
    # nor the matmul's K loop (tensor-core work, integer index arithmetic)
    (mm,) = lines.compiled(DATA / "examples_h100_1122" / "event-matmul-v2" / "compiled" / "mm")
    assert not any("line_" in o.metric for o in op.diagnose(evidence(lines=mm)))


def test_annotation_and_event_runs_write_their_line_files(tmp_path: Path) -> None:
    # a capture with source counters analysed in annotation mode: source/<stage>.md with opcodes and pipes
    result = pipeline.analyze(REPS / "full_mm.ncu-rep", "annotation", tmp_path / "a", None)
    (run,) = [p for p in (tmp_path / "a").rglob("source") if p.is_dir()]
    text = (run / "mm_kernel.md").read_text()
    assert (
        result.figures.opportunities
        and "| workloads.py:16 | 6995968 | 16.9% | 9365 | 41.2% | long_scoreboard |" in text
    )
    assert "| Stall samples | Share | Top stall | Pipes | Opcodes | What | Code |" in text
    assert "UIADD3 x1572864 (uniform datapath)" in text
    # an event run folder with its compiled PTX: lines/<stage>.md, said static
    folder = DATA / "examples_h100_1122" / "event-matmul-v2"
    plan = load_version("matmul", "v2").from_values({"m": 4096, "n": 4096, "k": 4096, "dtype": "bfloat16"})
    table = load_devices()
    h100 = resolve(table, "NVIDIA H100 80GB HBM3")
    analysis = EVENT.analyse(EVENT.open(folder / "timings.json"), Context(plan, table, h100))
    ((model,),) = analysis.data.values()
    assert model.kernel == "mm_kernel" and model.static
    EVENT.write(analysis, result, tmp_path)  # the result is not read: lines/<stage>.md from the analysis
    text = (tmp_path / "lines" / "mm.md").read_text()
    assert lines.STATIC in text and "| _triton.py:51 | 31 | 31 | 23.3% | integer ALU 58%, tensor cores 23%" in text


def test_a_memory_item_names_the_lines_that_access_memory_and_is_capped_by_the_memory_waits() -> None:
    # issue 42's other unseen pair: "uncoalesced global loads, est. 70%" while 97% of the samples sat on a line of
    # special functions. With the lines, the item names the load line and can save no more than the time warps
    # waited on memory (long_scoreboard, lg_throttle, drain: 30 of 1330 samples); the hot line becomes an item
    model = lines.measured("k", SFU_ROWS, SOURCE)
    e = evidence(ld_sectors=1e7, ld_use=4.0, lines=model)
    bare = next(o for o in op.diagnose(replace(e, lines=None)) if "bytes_per_sector" in o.metric)
    # 7/8 of the sectors wasted (280 MB): 70 us at the 4000 GB/s roof, 7% of the stage (before issue 52's fix: the
    # whole distance, 80%, as if the stage's time were all sector traffic)
    assert bare.gain_pct == pytest.approx(100.0 * 8.75e6 * 32 / 4000e3 / 1000.0)
    found = op.diagnose(e)
    item = next(o for o in found if "bytes_per_sector" in o.metric)
    assert item.gain_pct == pytest.approx(100 * 30 / 1330)
    assert (
        item.change is not None and "its instructions in s: k.py:3 `v = tl.load(x + offs)` (LDG x1000)" in item.change
    )
    assert "warps waited on memory in 2% of the stall samples" in item.change
    hot = next(o for o in found if o.metric == "s.line_5_share")
    assert hot.gain_pct == pytest.approx(80.0 - 100 * 30 / 1330)  # what the named item leaves of the distance
    # a memory-bound kernel whose warps wait on memory keeps its estimate (full_add: 86% of its samples)
    add = ncu_source.line_model(ncu.load_actions(REPS / "full_add.ncu-rep")[0])
    assert add is not None
    kept = next(o for o in op.diagnose(replace(e, lines=add)) if "bytes_per_sector" in o.metric)
    assert kept.gain_pct == pytest.approx(bare.gain_pct) and "capped" not in (kept.change or "")


def test_other_aggregate_items_name_the_lines_that_carry_them() -> None:
    # an FP64 item names the line of the DFMAs; a spill item the line of the local loads; no cap on either
    from kbench.analysis.catalogue.lines import attributed

    model = lines.measured(
        "k",
        [
            row(3, "LDG.E.64 R4, desc[UR4][R2.64]", 1e3, {"long_scoreboard": 5}),
            row(5, "DFMA R4, R6, R8, R4", 4e5, {"wait": 500}),
            row(5, "STL.64 [R1+0x8], R4", 1e5, {"lg_throttle": 50}),
            row(6, "LDL.64 R4, [R1+0x8]", 2e5, {"long_scoreboard": 100}),
        ],
        SOURCE,
    )
    e = evidence(lines=model)
    fp64 = op.Opportunity(name="FP64", gain_pct=40.0, metric="s.fp64_instructions", value="1", change="use fp32")
    got = attributed(e, fp64)
    assert got.gain_pct == 40.0 and got.change == (
        "use fp32; its instructions in s: k.py:5 `v = tl.exp(v) / (1.0 + tl.exp(v))` (DFMA x400000)"
    )
    spill = op.Opportunity(name="spills", gain_pct=9.0, metric="s.local_memory_bytes", value="1", change="c")
    assert attributed(e, spill).change == (
        "c; its instructions in s: k.py:6 `idx = offs // d` (LDL x200000); k.py:5 `v = tl.exp(v) / (1.0 + tl.exp(v))` "
        "(STL x100000)"
    )
    other = op.Opportunity(name="waves", gain_pct=3.0, metric="s.waves", value="1", change="c")
    assert attributed(e, other) is other


def test_a_lines_guards_are_the_flag_conditions_of_the_if_blocks_that_hold_it() -> None:
    from kbench.analysis.lines import guards, holds

    text = [
        "def k(W: gl.constexpr, STAGGER: gl.constexpr, EARLY_Y: gl.constexpr):",
        "    for i in range(n):",
        "        if W == 0:",
        "            if STAGGER:  # the stagger",
        "                mbarrier.arrive(bar)",
        "        else:",
        "            if STAGGER:",
        "                mbarrier.wait(bar, ph)",
        "            if not EARLY_Y:",
        "                x = 1",
        "            elif n > 2:",
        "                y = 2",
    ]
    assert guards(text, 5) == ("STAGGER", "W == 0")
    assert guards(text, 8) == ("STAGGER",)  # in the else branch of `if W == 0`: W's condition false runs it
    assert guards(text, 10) == ("not EARLY_Y",) and guards(text, 12) == ()  # an elif branch: none of its block's
    assert guards(text, 2) == () and guards(text, 99) == ()
    chosen = {"STAGGER": True, "EARLY_Y": False}
    assert holds("STAGGER", chosen) is True and holds("not EARLY_Y", chosen) is True
    assert holds("STAGGER and not EARLY_Y", {**chosen, "STAGGER": False}) is False
    assert holds("W == 0", chosen) is None  # W is no configuration value
    assert holds("__import__('os').system('true')", chosen) is None  # read, never run
    assert holds("if", chosen) is None


def test_guards_and_holds_stay_safe_on_an_untrusted_source() -> None:
    from kbench.analysis.lines import guards, holds

    deep = "not " * 3000 + "STAGGER"
    assert holds(deep, {"STAGGER": True}) is None  # too long to read: no RecursionError out of the analysis
    assert holds("not " * 40 + "STAGGER", {"STAGGER": True}) is True
    assert holds("STAGGER < [1]", {"STAGGER": True}) is None  # only == and != are read
    text = [
        "def k(A: gl.constexpr):",
        "    if A:",
        "        for i in range(n):",
        "            pass",
        "        else:",
        "            pass",
        "        x = 1",
        "    if (A and",
        "            B):",
        "        y = 2",
        "    else:",
        "        z = 3",
    ]
    assert guards(text, 7) == ("A",)  # a loop's else is not an if's: the enclosing `if A` still holds line 7
    assert guards(text, 10) == () and guards(text, 12) == ()  # a condition over two lines is not read


def test_a_long_scoreboard_stall_names_loads_not_stores_and_keeps_an_atomics_cause() -> None:
    from kbench.analysis.catalogue.lines import Cause, waited_on

    use = lines.Line(file="k.py", line=30, code="acc += w * part", instructions=100.0,
                     opcodes={"LDS": 40.0, "STS": 40.0, "FFMA": 20.0}, samples=50.0)  # fmt: skip
    load = lines.Line(file="k.py", line=10, code="part = tl.load(p)", instructions=10.0, opcodes={"LDG": 10.0})
    store = lines.Line(file="k.py", line=20, code="tl.store(o, acc)", instructions=90.0, opcodes={"STG": 90.0})
    model = lines.LineModel(kernel="k", source=lines.MEASURED, lines=(use, store, load))
    shared = Cause("shared-memory accesses (STS, LDS) with bank conflicts", "wider accesses")
    named = waited_on("long_scoreboard", use, shared, model)
    assert named is not None and "k.py:10 `part = tl.load(p)` (LDG x10)" in named.what and "STG" not in named.what
    assert waited_on("short_scoreboard", use, shared, model) is shared  # an MIO wait: the line's own cause stands
    atomics = Cause("atomics (ATOMG.E.ADD)", "reduce first", costly=True)
    assert waited_on("long_scoreboard", use, atomics, model) is atomics


def test_rounds_count_how_often_each_warp_ran_a_lines_instructions() -> None:
    """The first row (the kernel's entry, in address order) counts the warps; a line's loads executed over the
    instructions written and the warps: a loop's loads several rounds, unrolled loads one."""
    rows = [
        {"file": "k.py", "line": 1, "sass": "LDC R1, c[0x0][0x28]", "inst_executed": 64.0, "stall_samples": 0.0},
        {"file": "k.py", "line": 5, "sass": "LDG.E.128 R4, desc[UR4][R2.64]", "inst_executed": 512.0,
         "stall_samples": 3.0},
        {"file": "k.py", "line": 5, "sass": "LDG.E.128 R8, desc[UR4][R2.64+0x10]", "inst_executed": 512.0,
         "stall_samples": 1.0},
        {"file": "k.py", "line": 7, "sass": "LDG.E R3, desc[UR4][R6.64]", "inst_executed": 64.0, "stall_samples": 0.0},
        {"file": "k.py", "line": 7, "sass": "LDG.E R5, desc[UR4][R6.64+0x4]", "inst_executed": 0.0,
         "stall_samples": 0.0},  # never ran: not one of the instructions written that executed
        {"file": "k.py", "line": 9, "sass": "FFMA R4, R4, R8, R4", "inst_executed": 512.0, "stall_samples": 9.0},
    ]  # fmt: skip
    model = lines.measured("k", rows, {})
    assert model.warps == 64.0
    by = {x.line: x for x in model.lines}
    loads = lambda op: op.startswith("LDG")  # noqa: E731
    assert model.rounds(by[5], loads) == pytest.approx(8.0)  # 1024 executions of 2 instructions by 64 warps
    assert model.rounds(by[7], loads) == pytest.approx(1.0)
    assert model.rounds(by[9], loads) is None  # no load on it
    assert lines.LineModel("k", lines.STATIC, model.lines).rounds(by[5], loads) is None  # no warps counted
