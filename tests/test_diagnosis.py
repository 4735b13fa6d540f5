"""The diagnosis on kernels with one known defect and their fixed twins (tests/data/validation, captured on an H100,
tests/data/validation_h100, and an H200, tests/data/validation_h200): the defective version's Top 1 names the
mechanism and its change, and its estimated gain is within 0.5x-2x of the gain its twin realized; healthy kernels
are told they are at their practical roof. Event mode diagnoses from timings, the compiled kernels' launch facts and
the recorded data flow; annotation mode from ncu's counters (large captures are committed xz-compressed)."""

from __future__ import annotations

import json
import lzma
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kbench.analysis.access_figures import predicted_of
from kbench.analysis.catalogue import stalls
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.figures import PlanFigures
from kbench.analysis.opportunities import Opportunity
from kbench.modes import registry
from kbench.modes.base import Context
from kbench.modes.event import EVENT
from kbench.plan.discovery import load_version
from tests.conftest import DATA

KERNELS = [str(DATA / "validation")]


def folder_of(run: str, mode: str) -> Path:
    """``run`` is <kernel>-<version>, or <device>/<kernel>-<version> for a device other than the H100, or
    <folder>/<kernel>-<version> for a folder of tests/data holding runs itself, as <folder>/<mode>/<run>
    (issue42_h100) or <folder>/<run>/<mode>."""
    device, _, name = run.rpartition("/")
    if device and (DATA / device / mode / name).is_dir():  # issue42_h100/<mode>/<run>
        return DATA / device / mode / name
    if device and (DATA / device).is_dir():
        return DATA / device / name / mode
    return DATA / f"validation_{device or 'h100'}" / name / mode


def plan_of(folder: Path):
    """The run's plan, its kernel found in tests/data/validation or in a kernels/ folder beside the run's folder."""
    record = folder / "params.json"
    params = json.loads((record if record.is_file() else folder / "result.json").read_text())  # same three keys
    beside = [str(p / "kernels") for p in folder.parents if (p / "kernels").is_dir() and DATA in p.parents]
    return load_version(params["kernel"], params["version"], [*KERNELS, *beside]).from_values(params["params"])


def analysed(run: str, mode: str, tmp: Path = Path("/tmp")) -> PlanFigures:
    """A committed H100 run's figures, re-analysed here (event: its timings and tiling; annotation: its .ncu-rep)."""
    folder = folder_of(run, mode)
    device = json.loads((folder / "result.json").read_text())["device"]
    ctx = Context(plan_of(folder), load_devices(), resolve(load_devices(), device))
    if mode == "event":
        tiling = {p.stem: json.loads(p.read_text()) for p in (folder / "tiling").glob("*.json")}
        capture = EVENT.open(folder / "timings.json")
        capture = type(capture)(files=capture.files, live=False, tiling=tiling, predicted=predicted(run))
        analysis = EVENT.analyse(capture, ctx)
    else:
        report = folder / "profile.ncu-rep"
        if not report.exists():  # committed compressed
            report = tmp / f"{run.replace('/', '_')}-{mode}.ncu-rep"
            report.write_bytes(lzma.decompress((folder / "profile.ncu-rep.xz").read_bytes()))
        backend = registry.get(mode)
        tiling = {p.stem: json.loads(p.read_text()) for p in (folder / "tiling").glob("*.json")}
        analysis = backend.analyse(replace(backend.open(report), tiling=tiling), ctx)
    return analysis.figures


def top(run: str, mode: str, tmp: Path = Path("/tmp")) -> tuple[list[Opportunity], float]:
    """Top 3 of a committed H100 run, re-analysed here, and the run's plan time."""
    f = analysed(run, mode, tmp)
    return f.opportunities, f.total_us


def predicted(run: str) -> dict[str, Any]:
    """The access run committed beside a run (<folder>/access/<run>/access.json, made on a CPU at the run's
    parameters), as the GPU modes read it from predicted.json; {} where none was committed."""
    device, _, name = run.rpartition("/")
    path = DATA / device / "access" / name / "access.json"
    return predicted_of(json.loads(path.read_text())) if device and path.is_file() else {}


def realized(before: str, after: str, mode: str, by_events: bool = False) -> float:
    """The gain the fixed twin realized on the H100: 1 - its plan time over the defective one's, in percent;
    ``by_events``: on the stages' CUDA-event medians (timings.json), the time a host-time item's gain counts."""

    def took(run: str) -> float:
        folder = folder_of(run, mode)
        if by_events:
            stages = json.loads((folder / "timings.json").read_text())["stages"].values()
            return float(sum(statistics.median(s["samples_us"]) for s in stages))
        return float(json.loads((folder / "result.json").read_text())["figures"]["total_us"])

    times = [took(r) for r in (before, after)]
    return 100.0 * (1.0 - times[1] / times[0])


I42 = "validation_h100_1127"  # issue 42's pairs (tests/data/validation_h100_1127)
S43 = "validation_h100_sampled"  # issue 43's event runs with PM sampling (tests/data/validation_h100_sampled)
NEW = "h100_1125"  # the runs of 2026-11-25 on an H100 (tests/data/validation_h100_1125)
S52 = "validation_h100_serving"  # issue 52's runs at DeepSeek's shapes (H100 2026-11-27, event mode, no sampling)
D51 = "validation_h100_distance"  # issue 51's design-distance pairs, H100 2026-11-27 (event runs PM-sampled)
PAIRS = [
    # before, after, the mechanism Top 1 must name, a word its change must contain, the modes checked
    ("underfilled-before", "underfilled-after", "Underfilled grid in rowsum: 16 CTAs on 132 SMs", "split", "ea"),
    ("tile_mm-spilling", "tile_mm-base", "Register spills in mm", "num_warps", "ea"),
    ("tile_mm-fma", "tile_mm-base", "Tensor cores idle in mm", "tl.dot", "ea"),
    # the shipped MLA decode versions (H100, event mode): unfused -> fused at s=16, fused -> split-KV at s=1
    (
        "mla_decode-v1-s16",
        "mla_decode-v2-s16",
        "Fuse stages scores, softmax, pv: kv (151 MB) is read by 2",
        "one kernel",
        "e",
    ),
    ("mla_decode-v2-s1", "mla_decode-v3-s1", "Underfilled grid in attention: 32 CTAs on 132 SMs", "split-KV", "e"),
    # issue 44's Gluon kernel (annotation mode, source lines): the next tile's copy refilled right before its wait
    (
        "h100_gluon/mla_decode-v7_fa3",
        "h100_gluon/mla_decode-v7",
        "Pipeline starved in attention: warps wait for the asynchronous copies (TMA) that fill their next stage, at "
        "the mbarrier `bars.index(1 + nxt)`, which TMA copies complete",
        "P.V of tile j before Q.K^T of tile j+1",
        "a",
    ),
    # H200: the data flow (fusion), launches, coalescing (ncu only) and the partial wave (occupancy calculator in
    # event mode, ncu's occupancy limits in annotation mode)
    (
        "h200/softmax-three_pass",
        "h200/softmax-fused",
        "Fuse stages max, sum, norm: x (537 MB) is read by 3",
        "one kernel for max, sum, norm",
        "ea",
    ),
    (
        "h200/launches-per_row",
        "h200/launches-one_launch",
        "Launch-bound stage axpb: 256 kernel launches",
        "one kernel",
        "ea",
    ),
    (
        "h200/transpose-naive",
        "h200/transpose-tiled",
        "Uncoalesced global loads in transpose: 4.0 of every 32 bytes",
        "tl.trans",
        "a",
    ),
    (
        "h200/tail-before",
        "h200/tail-after",
        "Partial last wave in poly: 144 CTAs fill 1.09 waves of 132 (1 per SM, limited by registers",
        "multiple of 132",
        "ea",
    ),
    # H100, 2026-11-25 (issue 28): mechanisms read from the compiled kernel (event) and the counters (annotation)
    (
        f"{NEW}/tile_mm-nostage",
        f"{NEW}/tile_mm-base",
        "Operand loads not pipelined in mm (num_stages=1)",
        "num_stages of 3 or 4",
        "ea",
    ),
    (
        f"{NEW}/tile_mm-mmasync",
        f"{NEW}/tile_mm-base",
        "Warp-level MMA in mm on a Hopper GPU: mma.sync m16n8k16",
        "num_warps a multiple of 4",
        "ea",
    ),
    (f"{NEW}/tile_mm-narrow", f"{NEW}/tile_mm-base", "Narrow tensor tiles in mm: wgmma m64n32k16", "BLOCK_N", "ea"),
    (
        f"{NEW}/tile_mm-tf32",
        f"{NEW}/tile_mm-base",
        "Tensor cores run tf32 in mm, not the plan's fp16",
        "no .to(tl.float32)",
        "ea",
    ),
    (
        f"{NEW}/stream-few",
        f"{NEW}/stream-many",
        "Too few bytes in flight in axpb: 0.5 KiB per SM (1 CTA x 1 warp",
        "more warps",
        "ea",
    ),
    (
        f"{NEW}/rowloop-narrow",
        f"{NEW}/rowloop-wide",
        "Too few bytes in flight in rowsum: 4.0 KiB per SM (32 CTAs x 1 warp",
        "a larger BLOCK",
        "ea",
    ),
    (
        f"{NEW}/rowloop-long_narrow",
        f"{NEW}/rowloop-long_wide",
        "Too few bytes in flight in rowsum: 1.0 KiB per SM (2 CTAs x 4 warps",
        "more warps per CTA",
        "ea",
    ),
    (
        f"{NEW}/atomics-per_element",
        f"{NEW}/atomics-per_cta",
        "Atomic contention in sum: 1.68e+07 atomics executed at 1 address",
        "one tl.atomic_add per program",
        "ea",
    ),
    (
        f"{NEW}/fp64-double",
        f"{NEW}/fp64-single",
        "FP64 arithmetic in expo (plan precision fp32): 2432 FP64 instructions per thread",
        "no .to(tl.float64)",
        "ea",
    ),
    (
        f"{NEW}/ilp-serial",
        f"{NEW}/ilp-parallel",
        "Too few warps to hide arithmetic latency in poly: 4 warps per SM (1 CTA x 4 warps), 1 per scheduler",
        "more CTAs per SM",
        "ea",
    ),
    (
        f"{NEW}/trimm-full",
        f"{NEW}/trimm-skip",
        "Work beyond the model in trimm: ncu counted 2.00x the plan's FLOPs",
        "skip tiles",
        "a",
    ),
    # issue 29: a product chained into a register-operand wgmma, repeated by both warpgroups that split the second one
    # (read from the PTX and the config in event mode, confirmed by ncu's count in annotation mode)
    (
        f"{NEW}/chain-split",
        f"{NEW}/chain-whole",
        "Work repeated by warpgroups in attention: each of its 2 warpgroups (num_warps=8)",
        "num_warps=4, about 149 registers per thread",
        "ea",
    ),
    # issue 42 (H100, 2026-11-27): causes in one kernel, one line, a few programs or the host, none of them in the
    # catalogue before (tests/data/validation_h100_1127; ragged with an access run made on a CPU beside it)
    (
        f"{I42}/convert-torch_cast",
        f"{I42}/convert-in_kernel",
        "Kernel unrolled_elementwise_kernel",
        "plan's setup",
        "ea",
    ),
    (f"{I42}/absmax-torch_abs", f"{I42}/absmax-fused", "Kernel vectorized_elementwise_kernel", "plan's kernel", "ea"),
    (f"{I42}/hostsync-per_chunk", f"{I42}/hostsync-no_sync", "Host time inside axpb", "on the device", "e"),
    (f"{I42}/sfu-per_term", f"{I42}/sfu-factored", "Line _common.py:27 holds", "hoist", "e"),
    # annotation: ncu's XU pipe at 79% of its peak, the busiest unit (issue 51: the pipe's own model, est. 78.6%)
    (
        f"{I42}/sfu-per_term",
        f"{I42}/sfu-factored",
        "Special-function pipe (XU) at 79% of its peak in expsum",
        "hoist",
        "a",
    ),
    (f"{I42}/divmod-modulo", f"{I42}/divmod-compare", "Stalls on not_selected and math_pipe_throttle", "divis", "a"),
    (f"{I42}/ragged-per_segment", f"{I42}/ragged-chunked", "Uneven programs in segsum", "pair each long", "e"),
    (f"{I42}/ragged-per_segment", f"{I42}/ragged-chunked", "SMs idle while the longest programs", "pair each", "a"),
    # issue 43: event mode's PM-sampled SM-busy evidence (no access run): the same Top 1 as annotation mode's ncu
    (f"{S43}/ragged-per_segment", f"{S43}/ragged-chunked", "SMs idle while the longest programs", "pair each", "e"),
    (f"{I42}/scalar_atomic-per_program", f"{I42}/scalar_atomic-wide", "Atomic contention in sum", "on chip", "ea"),
    (
        f"{I42}/splitk-serial_combine",
        f"{I42}/splitk-parallel_combine",
        "Underfilled grid in rowsum (kernel combine_kernel",
        "split each CTA",
        "ea",
    ),
    # issue 51: a design distance, no catalogued defect in the before (the kernels of one stage exchanging an
    # intermediate through DRAM, a special-function pipe, data read twice, a long tail of programs, latency, a product
    # repeated by warpgroups: Triton -> Gluon)
    (
        f"{D51}/scores-before",
        f"{D51}/scores-after",
        "Kernels scores_kernel and softmax_pv_kernel of attention",
        "fuse",
        "ea",
    ),
    (f"{D51}/epilogue-before", f"{D51}/epilogue-after", "Kernels gemm_kernel and epilogue_kernel", "fuse", "ea"),
    (f"{D51}/splitk_gemm-before", f"{D51}/splitk_gemm-after", "Kernels mm_kernel and sum_kernel of mm", "fuse", "ea"),
    (f"{D51}/fdiv-before", f"{D51}/fdiv-after", "Special-function pipe (XU) at 86%", "approximate division", "ea"),
    (f"{D51}/twopass-before", f"{D51}/twopass-after", "DRAM", "read each input once", "ea"),
    (f"{D51}/persist-before", f"{D51}/persist-after", "SMs idle while the longest programs", "persistent grid", "ea"),
    (f"{D51}/gather-before", f"{D51}/gather-after", "Too few bytes in flight in bagsum", "loads in flight", "ea"),
    (f"{D51}/mla_decode-v6", f"{D51}/mla_decode-v7", "Work repeated by warpgroups in attention", "Gluon", "ea"),
    # a split whose partials cost nothing (2.2 MB against 2.2 GB): "stop", and the fix realizes about as little
    (f"{D51}/splitkv-before", f"{D51}/splitkv-after", "Stage decode is at its practical roof", "none in decode", "ea"),
    # issue 52: v7 at DeepSeek's 128 heads (s=1) runs v3's Triton split-KV, whose partial kernel repeats Q.K^T on both
    # warpgroups (1.53x); its model's intensity is under the ridge but what executes is over it. Top 1 names the
    # repeat and the Gluon route; v9 (v7's Gluon kernel over split work items) took it: 150.5 -> 94.9 us
    (f"{S52}/mla_decode-v7-h128", f"{S52}/mla_decode-v9-h128", "Work repeated by warpgroups in partial", "Gluon", "e"),
    # issue 52, the seesaw (annotation, b=32 s=16 h=16): v10's warpgroups split each score tile's columns (m64n32
    # wgmmas, Q read from shared memory by both); v11's each compute whole tiles of their own
    (
        f"{S52}/mla_decode-v10-s16",
        f"{S52}/mla_decode-v11-s16",
        "Narrow tensor tiles in attention: wgmma m64n32k16",
        "seesaw",
        "a",
    ),
]
MODES = {"e": "event", "a": "annotation"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("before", "after", "mechanism", "change", "mode"),
    [(b, a, m, c, MODES[x]) for b, a, m, c, modes in PAIRS for x in modes],
)
def test_top1_names_the_defect_and_its_gain_matches_the_fix(
    before: str, after: str, mechanism: str, change: str, mode: str, tmp_path: Path
) -> None:
    opps, _ = top(before, mode, tmp_path)
    first = opps[0]
    assert first.name.startswith(mechanism) and first.named, [o.name for o in opps]
    assert first.change is not None and change in first.change
    gain = realized(before, after, mode, by_events=first.metric.endswith(".host_gap_pct"))
    assert 0.5 <= first.gain_pct / gain <= 2.0, (first.gain_pct, gain)


def test_ncu_mode_names_the_uncoalesced_loads_from_the_full_set(tmp_path: Path) -> None:
    opps, _ = top("h200/transpose-naive", "ncu", tmp_path)
    assert opps[0].name.startswith("Uncoalesced global loads in transpose") and opps[0].gain_pct > 50


def test_event_mode_cannot_see_coalescing_and_says_so(tmp_path: Path) -> None:
    # no counters: the naive transpose is only "far from its roof, no mechanism in this mode's data"
    opps, _ = top("h200/transpose-naive", "event", tmp_path)
    assert opps[0].rest and not opps[0].named and opps[0].name.startswith("Unexplained in transpose")
    assert opps[0].change is not None and "--prof_type=annotation" in opps[0].change


def test_event_mode_says_what_counters_would_show_of_masked_work() -> None:
    # trimm full computes every tile of A @ B and masks half away: event mode sees no mechanism (the compiled kernel
    # is the same as its twin's) and says which counters would; annotation mode counts 2x the FLOPs (the pairs above)
    opps, _ = top(f"{NEW}/trimm-full", "event")
    assert opps[0].rest and "issued FLOPs" in (opps[0].change or "")


@pytest.mark.parametrize(
    ("run", "mode"),
    [
        ("vector_add-base", "event"),
        ("vector_add-base", "annotation"),
        *[
            (f"{NEW}/{k}", m)
            for k in ("stream-many", "rowloop-wide", "misalign-aligned", "syncs-per_iter", "syncs-at_end")
            for m in MODES.values()
        ],
        (f"{NEW}/ilp-parallel", "event"),  # 91% of the 62.4 TFLOP/s FMA ceiling (annotation: 89%)
        *[(f"h200/{k}", m) for k in ("softmax-fused", "transpose-tiled") for m in MODES.values()],
    ],
)
def test_a_kernel_at_its_roof_is_told_to_stop(run: str, mode: str, tmp_path: Path) -> None:
    opps, _ = top(run, mode, tmp_path)
    first = opps[0]
    assert "is at its practical roof" in first.name and first.name.endswith(": stop") and first.gain_pct < 10.0
    assert all(not o.named or "practical roof" in o.name for o in opps)  # no mechanism claimed


def test_a_stage_just_under_the_roof_gets_no_false_alarm() -> None:
    # the split row sum (event) reads at 89% of the highest streaming bandwidth measured (3095 GB/s write-only): not
    # "stop" (90%), and no mechanism is claimed for the rest
    opps, _ = top("underfilled-after", "event")
    assert not any(o.named for o in opps) and opps[0].rest and opps[0].gain_pct < 12.0


def test_a_tuned_gemm_gets_no_false_alarm() -> None:
    # matmul v2 at 86% of 793 TFLOP/s measured: the only mechanism named is its partial last wave (512 CTAs, one per
    # SM: 3.88 waves, 3% of its time), computed from its grid; ncu counted the stage, so its unexplained rest is said
    # under Top 3 (and in the Distance table), never an item of it (issue 51)
    opps, _ = top("matmul-v2", "annotation")
    named = [o for o in opps if o.named]
    assert [o.metric for o in named] == ["mm.waves"] and named[0].gain_pct == pytest.approx(3.0, abs=0.1)
    assert not any(o.rest for o in opps)


def test_a_grid_that_fills_every_sm_is_not_underfilled() -> None:
    # tile_mm base: 256 CTAs at 2 per SM on 132 SMs is 0.97 waves, yet every SM holds a CTA
    opps, _ = top("tile_mm-base", "annotation")
    assert not any("Underfilled" in o.name or "Partial last wave" in o.name for o in opps)


def test_a_named_mechanism_that_explains_little_does_not_hide_the_rest() -> None:
    # tile_mm cudacore (64x64 tiles, BK=8, products summed with tl.sum on fp32 values): Triton lowered it to tf32
    # tensor instructions (ncu counts every tensor FLOP on the tf32 path), and 1.55 waves is a real partial wave;
    # the stage runs at 5% of the practical fp16 roof, and what the two leave is said (under Top 3: ncu counted the
    # stage), with what would show it
    opps, _ = top("tile_mm-cudacore", "annotation")
    assert [o.metric for o in opps] == ["mm.tensor_precision", "mm.waves"]
    assert opps[0].value == "tf32" and opps[0].named
    assert opps[1].name.startswith("Partial last wave in mm: 1024 CTAs fill 1.55 waves") and opps[1].named


def test_a_few_spilled_registers_are_not_the_top_finding() -> None:
    # mla_decode v2 at s=16 (H100): its fastest tile (64x64 on 8 warps) spills 2 of 255 registers; the spill is
    # weighed by the share of values spilled (under 1%), so the rest of the distance to the roof leads
    opps, _ = top("mla_decode-v2-s16", "event")
    spill = [o for o in opps if o.name.startswith("Register spills")]
    assert spill and spill[0].gain_pct < 2.0
    assert not opps[0].name.startswith("Register spills"), [o.name for o in opps]


def test_the_split_kv_decode_at_its_roof_gets_no_false_alarm() -> None:
    # mla_decode v3 at b=32 s=1 t=8192 (H100): the partial stage reads the cache at 99% of the measured copy rate
    opps, _ = top("mla_decode-v3-s1", "event")
    assert all(o.gain_pct < 5.0 for o in opps), [(o.name, o.gain_pct) for o in opps]
    assert any(o.name.startswith("Stage partial is at its practical roof") for o in opps)


def every_item(run: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> list[Opportunity]:
    """Every item the catalogue names for a committed run, not only the Top 3, by gain."""
    from kbench.analysis import opportunities

    seen: list[Opportunity] = []
    ranked = opportunities.rank

    def spy(candidates: Any, **kw: Any) -> Any:
        seen.extend(c for c in candidates if c is not None)
        return ranked(candidates, **kw)

    monkeypatch.setattr(opportunities, "rank", spy)
    top(run, mode)
    return sorted(seen, key=lambda o: -o.gain_pct)


def test_narrow_tiles_offer_fewer_warpgroups_only_where_registers_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    # chain split (d=128) holds 117 registers per thread on 8 warps: one warpgroup may take the whole BLOCK_N
    (narrow,) = [o for o in every_item(f"{NEW}/chain-split", "event", monkeypatch) if "tensor_feed_cap" in o.metric]
    assert narrow.change is not None and "num_warps=4" in narrow.change and not narrow.structural
    # mla_decode v2 (d=512) holds 255: halving its warpgroups would double its accumulators; and its CTA holds 221184
    # of the 233472 bytes of shared memory an SM gives: no wider tile fits, the item is structural and ranked last
    opps = every_item(f"{NEW}/mla_decode-v2-s16", "event", monkeypatch)
    (narrow,) = [o for o in opps if o.metric == "attention.tensor_feed_cap"]
    assert narrow.structural and narrow.change is not None and "num_warps=4" not in narrow.change
    assert "holds 221184 of the 233472 bytes of shared memory" in narrow.change
    assert narrow.name.startswith("Narrow tensor tiles in attention")


def test_a_long_scoreboard_stall_names_the_loads_it_waits_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # mla_decode v12 at b=4 s=16 h=16 (annotation, the H100, 2026-11-28): v9's Triton combine stalls on the long
    # scoreboard (70% of its samples) at `acc += w[:, None] * part`, whose instructions also hold the weights' layout
    # conversion (STS, LDS, BAR.SYNC). The item called the line "shared-memory accesses with bank conflicts" and asked
    # for fewer conversions: v14 wrote the combine in Gluon without any (no bar.sync, st/ld.shared in its PTX) and
    # its combine took 10.56 us against 10.21 (est. 8.1%, realized none). A long-scoreboard wait is a wait on the
    # L1TEX path: the line uses the results of the partials' global loads. v14's own item named its exp2 (MUFU.EX2)
    for run, load in (("mla_decode-v12-b4", "v9.py:242 `part = tl.load("), ("mla_decode-v14-b4", "v14.py:53 `p0 = ")):
        opps = every_item(f"validation_h100_serving/{run}", "annotation", monkeypatch)
        (item,) = [o for o in opps if o.metric == "combine.stall_long_scoreboard"]
        assert "the line is a use of global or local loads' results, which the stalled warps wait on" in item.name
        assert load in item.name and "LDG x" in item.name
        assert "bank conflicts" not in item.name and "special-function" not in item.name
        assert item.change is not None and item.change.startswith("more independent loads in flight")
        # the mbarrier wait, a long-scoreboard wait too, stays what it is
        (wait,) = [o for o in opps if o.metric == "partial.stall_long_scoreboard"]
        assert "the line is an mbarrier wait (SYNCS.PHASECHK in a retry loop)" in wait.name


@pytest.mark.parametrize(("run", "rounds"), [("mla_decode-v12-b4", 8.0), ("mla_decode-v14-b4", 4.0)])
def test_a_load_wait_is_priced_by_the_rounds_its_loads_come_in(
    run: str, rounds: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the combines' loads sit in loops: v9's issues each chunk's loads in its own iteration (2048 warps ran its 2
    # partial-load instructions 32768 times: 8 rounds), v14's two chunks a step (4 rounds). Issued in one round, the
    # wait of the other rounds goes: the stall's share of the distance times 1 - 1/rounds
    opps = every_item(f"validation_h100_serving/{run}", "annotation", monkeypatch)
    (item,) = [o for o in opps if o.metric == "combine.stall_long_scoreboard"]
    assert f"each warp issued them {rounds:.2f} times over, on average over the warps launched" in item.name
    assert item.inputs["rounds"] == pytest.approx(rounds) and item.formula is not None
    assert item.formula.endswith(" * (1 - 1 / rounds)")
    assert item.gain_pct == pytest.approx(
        item.inputs["left_pct"] * item.inputs["long_scoreboard"] / item.inputs["all_stalls"] * (1 - 1 / rounds)
    )


def test_loads_issued_once_per_warp_get_no_loads_in_flight_item(monkeypatch: pytest.MonkeyPatch) -> None:
    # v16's combine (H100, 2026-11-28) loads every chunk of a group at once: each of its 34 load instructions ran
    # once per warp. Its warps still wait on them (84% of its stalls, long scoreboard), but no later round can be
    # brought forward: v12's item (est. 8.1%, "more independent loads in flight") was taken, and realized 0.96 us of
    # the combine's 10.21 (9.25 us). Asking again for more loads in flight would be advice already followed
    run = "validation_h100_serving/mla_decode-v16-b4"
    opps = every_item(run, "annotation", monkeypatch)
    assert not [o for o in opps if o.metric == "combine.stall_long_scoreboard"]
    with monkeypatch.context() as m:  # the same evidence read as before: the item is back
        m.setattr(stalls, "settled", lambda found, e: False)
        (back,) = [o for o in every_item(run, "annotation", m) if o.metric == "combine.stall_long_scoreboard"]
        assert "each warp issued them once (no loop re-issued them)" in back.name
    figures = analysed(run, "annotation")
    assert all("more independent loads in flight" not in (o.change or "") for o in figures.opportunities)
    (fall,) = [w for w in figures.waterfalls if w.stage == "combine"]  # the distance keeps the wait, measured
    assert any(s.name.startswith("stall on long_scoreboard: warps wait on global") and s.us > 2.0 for s in fall.steps)


@pytest.mark.parametrize(
    ("run", "stage"),
    [(f"{I42}/hostsync-no_sync", "axpb"), (f"{I42}/hostsync-per_chunk", "axpb"), (f"{I42}/ragged-chunked", "segsum")],
)
def test_a_one_wave_grid_whose_warps_load_once_gets_no_loads_in_flight_item(
    run: str, stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the healthy "after" kernels of issue 42's pairs: one wave, each warp's loads issued once. The stall item asked
    # for more loads in flight (est. 33.2%, 26.7%, 22.7%); once it was gone, the hot-line item named the line's
    # FP32 arithmetic and asked for tensor cores. Neither is left
    opps = every_item(run, "annotation", monkeypatch)
    named = [o.metric for o in opps]
    assert f"{stage}.stall_long_scoreboard" not in named and not [m for m in named if ".line_" in m]
    monkeypatch.setattr(stalls, "settled", lambda found, e: False)  # read as before: the stall item is back
    assert f"{stage}.stall_long_scoreboard" in [o.metric for o in every_item(run, "annotation", monkeypatch)]


@pytest.mark.parametrize(
    ("run", "metric", "saved_pct"),
    [
        ("mla_decode-v11-s16", "attention.mbarrier_wait_share", 1.46),  # 140.29 us against 138.24
        ("mla_decode-v12-b4", "partial.stall_long_scoreboard", 1.398),  # 30.91 against 30.48
        ("mla_decode-v14-b4", "partial.stall_long_scoreboard", 1.851),  # 31.12 against 30.54
    ],
)
def test_a_wait_the_tuner_timed_the_stage_without_is_priced_at_what_that_saved(
    run: str, metric: str, saved_pct: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mla_decode v11's second warpgroup waits at `S0_DONE` under `if STAGGER:`; the tuner's runner-up is the same
    # configuration with STAGGER=False. The wait's item was Top 1 at est. 12.5%, 18.4% and 20.0% (its line's share of
    # the samples); the variant without the wait ran 1.5%, 1.4% and 1.9% faster, within noise (H100, 2026-11-27/28)
    opps = every_item(f"validation_h100_serving/{run}", "annotation", monkeypatch)
    (wait,) = [o for o in opps if o.metric == metric and "S0_DONE" in o.name]
    figures = analysed(f"validation_h100_serving/{run}", "annotation")
    stage = next(s for s in figures.stages if s.name == metric.split(".")[0])
    assert wait.gain_pct == pytest.approx(100.0 * stage.duration_us * saved_pct / 100.0 / figures.total_us, rel=1e-3)
    assert wait.change is not None and "without this line (STAGGER=False: its `if STAGGER` false)" in wait.change
    assert wait.formula is not None and "tuned_saving_us" in wait.formula
    assert "S0_DONE" not in figures.opportunities[0].name  # no longer Top 1


def test_work_repeated_by_warpgroups_is_recognised_from_the_ptx(monkeypatch: pytest.MonkeyPatch) -> None:
    # mla_decode v2 on 8 warps: both warpgroups compute the whole Q.K^T (wgmma m64n32k16, A from shared memory) that
    # feeds P.V (m64n256k16, A in registers), which they split: the PTX predicts 1.53x the model's FLOPs, ncu counted
    # 1.53x. One warpgroup would need 256 accumulator registers per thread (255 the most): no tile change reaches it,
    # a rewrite does (issue 42: one reached it on an H100), so it is ranked, not structural, its change saying what
    # was tried; no "work beyond the model" item says it again; trimm's excess (masked tiles) has no such chain. These
    # records predate the TTGIR: the event run's repeat is inferred from the config, and says so
    for mode, how in (("annotation", ", 1.53x counted by ncu"), ("event", " and BLOCK_M=64 (no TTGIR recorded)")):
        opps = every_item(f"{NEW}/mla_decode-v2-s16", mode, monkeypatch)
        (rep,) = [o for o in opps if o.metric == "attention.repeated_tensor_work"]
        assert rep.name.endswith(f"1.53x the model's tensor FLOPs expected from the PTX{how}")
        assert not rep.structural and rep.change is not None and "needs 256 fp32 registers per thread" in rep.change
        assert "Routes that reach it:" in rep.change
        assert not any(o.metric == "attention.flops_over_model" for o in opps)
        assert 30.0 < rep.gain_pct < 40.0
    trimm = every_item(f"{NEW}/trimm-full", "annotation", monkeypatch)
    assert any(o.metric == "trimm.flops_over_model" for o in trimm)
    assert not any(o.metric.endswith("repeated_tensor_work") for o in trimm)


def test_the_fused_mla_decode_is_told_what_is_structural_and_what_is_left() -> None:
    # mla_decode v2 at s=16: the repeated product comes first (a rewrite reaches it), then the underfilled grid (128
    # CTAs on 132 SMs); the narrow tiles explain more of the distance but are structural (shared memory and registers
    # full): said under the list, not ranked
    for mode in MODES.values():
        folder = folder_of(f"{NEW}/mla_decode-v2-s16", mode)
        device = json.loads((folder / "result.json").read_text())["device"]
        assert device
        opps, _ = top(f"{NEW}/mla_decode-v2-s16", mode)
        assert opps[0].name.startswith("Work repeated by warpgroups in attention") and 30 < opps[0].gain_pct < 40
        assert any(o.name.startswith("Underfilled grid in attention: 128 CTAs on 132 SMs") for o in opps)
        assert not any(o.structural for o in opps)
        assert all(o.gain_pct < 1.0 for o in opps if o.rest)


def test_structural_items_are_said_under_the_list_not_ranked() -> None:
    from kbench.analysis.opportunities import rank

    big = Opportunity(
        name="big", gain_pct=40.0, metric="s.a", value="1", change="what would", named=True, structural=True
    )
    small = Opportunity(name="small", gain_pct=3.0, metric="s.b", value="1", named=True)
    found, note = rank([big, small], fewer=lambda n: f"{n} listed.")
    assert [o.name for o in found] == ["small"]
    assert (
        note is not None
        and "Structural (no edit of the kernel as written reaches it): big (est. 40.0%): what would" in note
    )
    # nothing else left: the structural item is listed
    found, _ = rank([big], fewer=lambda n: f"{n} listed.")
    assert [o.name for o in found] == ["big"]


@pytest.mark.slow
def test_fusing_a_reduction_of_partial_results_saves_only_the_reducing_stages_launch_and_tail() -> None:
    # mla_decode v9 at h=128 s=1 (split-KV: each sequence's two chunks write partials that a combine kernel reduces).
    # Fused (v10: the last chunk of each row block merges them, in the same call on the H100), the partials are still
    # written, read back and merged: 95.2 -> 93.0 us, 2.3% (5.1% in the benchmark run). The item priced the partials
    # as never written (23.2%), then as reads saved (7.3%, 3.2x; v11 -> v12: 9.4% against 2.9%); now the combine
    # saves its time beyond its 21.0 MB at the practical 3095.1 GB/s (8.32 - 6.79 us)
    before, after = f"{S52}/mla_decode-v9-h128-fuse", f"{S52}/mla_decode-v10-h128"
    f = analysed(before, "event")
    (fuse,) = [o for o in f.opportunities if o.name.startswith("Fuse stages partial, combine")]
    assert "partial results the next reduces" in fuse.name and "launch and tail" in fuse.name
    combine = next(s for s in f.stages if s.name == "combine")
    assert combine.dram_bytes == 21004288.0 and combine.duration_us == pytest.approx(8.32)
    tail = combine.duration_us - combine.dram_bytes / 3095.1e3  # beyond its bytes at the practical roof: 1.53 us
    # and the partial stage's share of the log-sum-exps and meta it would no longer write (0.03 us)
    assert fuse.inputs["saved_us"] == pytest.approx(tail, abs=0.05)
    assert 0.5 <= fuse.gain_pct / realized(before, after, "event") <= 1.5


@pytest.mark.slow
def test_a_cooperative_merge_in_the_kernel_realizes_the_fusion_items_estimate_at_mtp() -> None:
    # mla_decode v16 at MTP (b=32 s=4 t=4096 h=16: four chunks a sequence, a combine kernel of 8.90 us). Item 2 of
    # its annotation report, "Fuse stages partial, combine", priced the combine's launch and tail; v17 merges each
    # row block in the attention kernel, its chunks together, the grid launched cooperatively: 64.29 + 8.90 -> 71.14
    # us under ncu (H100, 2026-11-28; 68.75 -> 67.75 us in the benchmark run, which times v16's kernels one by one)
    before, after = f"{S52}/mla_decode-v16-mtp", f"{S52}/mla_decode-v17-mtp"
    f = analysed(before, "annotation")
    (fuse,) = [o for o in f.opportunities if o.name.startswith("Fuse stages partial, combine")]
    assert "launch and tail" in fuse.name
    gain = realized(before, after, "annotation")
    assert gain == pytest.approx(100 * (1 - 71.14 / (64.29 + 8.90)), abs=0.05)
    assert 0.5 <= fuse.gain_pct / gain <= 1.5


def test_kbench_analyze_reads_the_launch_records_beside_a_capture(tmp_path: Path) -> None:
    # an annotation capture analysed offline with its plan: tiling/ beside it gives the catalogue the compiled kernel's
    # instruction mix, so the product both warpgroups repeat is named as it was live
    from kbench import pipeline

    folder = folder_of(f"{NEW}/mla_decode-v2-s16", "annotation")
    r = pipeline.analyze(folder / "profile.ncu-rep", "annotation", tmp_path, plan_of(folder))
    assert any(o.name.startswith("Work repeated by warpgroups in attention") for o in r.figures.opportunities)
    assert "wgmma m64n256k16" in (Path(r.out_dir) / "report.md").read_text()
    # the same capture alone: no launch records, no instruction mix: only ncu's count of work beyond the model
    alone = tmp_path / "alone" / "profile.ncu-rep"
    alone.parent.mkdir()
    alone.write_bytes((folder / "profile.ncu-rep").read_bytes())
    r = pipeline.analyze(alone, "annotation", tmp_path / "out", plan_of(folder))
    assert not any("Work repeated by warpgroups" in o.name for o in r.figures.opportunities)
    assert any(o.metric == "attention.flops_over_model" for o in r.figures.opportunities)


@pytest.mark.parametrize("mode", MODES.values())
def test_the_whole_wave_tail_claims_no_mechanism(mode: str) -> None:
    # tail after on the H200: 81% of the 62.7 TFLOP/s an FMA kernel reached there (it was 100% of cuBLAS SGEMM's 50.7,
    # the roof before): not "stop", and no mechanism is claimed for the rest
    opps, _ = top("h200/tail-after", mode)
    assert not any(o.named for o in opps) and opps[0].rest and 15.0 < opps[0].gain_pct < 25.0
