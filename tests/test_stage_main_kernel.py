"""A stage of several kernels: every fact (tiling, instruction mix, launch facts) belongs to the kernel it describes,
and an item about the stage's main kernel is weighed by that kernel's share (issue 42). The capture keeps every
Triton kernel a stage launched with its launch grid (tiling ``compiled_kernels``); nsys and the counter modes list
the kernels the GPU ran in each stage (Facts.kernels); the Evidence then describes the main kernel alone."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kbench.analysis import opportunities
from kbench.analysis import stages as st
from kbench.analysis import timeline as tl
from kbench.analysis import timeline_stages as ts
from kbench.analysis.catalogue.evidence import Evidence, finding
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.figures import Facts
from kbench.analysis.kernels import StageKernel, StageKernels, shares
from kbench.analysis.ptx import instruction_mix
from kbench.analysis.timeline_kernels import kernels_of, stage_kernels
from kbench.analysis.timing_stats import TimingStats
from kbench.capture import dataflow
from kbench.capture.artifacts import write_stage
from kbench.capture.prepare import Launched, PreparedStage, by_name
from kbench.modes.base import Context
from kbench.plan import autotune
from kbench.plan.base import Launch
from kbench.plan.discovery import load_version
from kbench.report.sections import Tiling
from tests.conftest import DATA

PTX = DATA / "ptx_h100"  # v3's split-KV kernel (wgmma) and its combine (no tensor-core instruction), real PTX
PARTIAL, COMBINE = "mla_v3_partial_kernel", "mla_v3_combine_kernel"
H100 = "NVIDIA H100 80GB HBM3"


class Compiled:
    """The parts of Triton's CompiledKernel the tiling record reads, around a real kernel's PTX (its registers and
    warps as ptx_h100/README.md records them)."""

    def __init__(self, name: str, warps: int, stages: int, registers: int, spills: int) -> None:
        self.metadata = SimpleNamespace(name=name, num_warps=warps, num_stages=stages, shared=None)
        self.asm = {"ptx": (PTX / f"{name}.ptx").read_text()}
        self.n_regs, self.n_spills = registers, spills

    def _init_handles(self) -> None:
        pass


def two_kernel_stage(tmp_path: Path) -> dict[str, Any]:
    """MLA decode's attention as one stage of two Triton kernels (the split-KV kernel, then its combine), the plan
    declaring a grid of 128: the tiling record kbench writes for it. The launch returns nothing, so the top-level
    facts are the last kernel's (the combine), as before issue 42."""
    plan = load_version("mla_decode", "v2").from_values({"b": 32, "s": 16, "t": 4096})
    stage = plan.checked_stages()[0]
    partial, combine = Compiled(PARTIAL, 8, 2, 255, 0), Compiled(COMBINE, 4, 1, 40, 0)
    ps = PreparedStage(
        stage,
        {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2},
        Launch(fn=lambda: None, grid=(128,)),
        autotune.TuneResult(best={}, history=[], source="fixed", path=None),
        compiled=combine,
        launched={PARTIAL: Launched(partial, [16, 32, 4]), COMBINE: Launched(combine, [32, 16, 1])},
    )
    return write_stage(tmp_path, ps)


def census(stage: str) -> StageKernels:
    """What the GPU ran in that stage (the census event mode builds from CUPTI; nsys and ncu fill the same model):
    the split-KV kernel holds 855 of the stage's 901 us on 2,048 CTAs. Launch facts as the tiling records them."""
    return StageKernels(
        stage=stage,
        kernels=shares(
            [
                StageKernel(name=COMBINE, launches=1, us=46.0, grid=[32, 16, 1], block=[128, 1, 1], registers=40,
                            shared_bytes=0, declared=False, source="CUPTI"),
                StageKernel(name=PARTIAL, launches=1, us=855.0, grid=[16, 32, 4], block=[256, 1, 1], registers=255,
                            shared_bytes=221184, declared=True, source="CUPTI"),
            ]
        ),
    )  # fmt: skip


def evidence_of(tmp_path: Path, kernels: bool) -> Evidence:
    plan = load_version("mla_decode", "v2").from_values({"b": 32, "s": 16, "t": 4096})
    stage = plan.checked_stages()[0]
    device = resolve(load_devices(), H100)
    facts = Facts.of(device, {stage.name: two_kernel_stage(tmp_path)})
    if kernels:
        facts = replace(facts, kernels={stage.name: census(stage.name)})
    ceilings = device.ceilings()[stage.precision]
    f = st.timed(stage, TimingStats.of([901.0]), ceilings, True, facts.practical.get(stage.precision))
    return facts.evidence(f, 901.0)


def test_the_capture_keeps_every_triton_kernel_of_a_stage_with_its_launch_grid(tmp_path: Path) -> None:
    t = two_kernel_stage(tmp_path)
    assert t["kernel"] == COMBINE and t["grid"] == [128]  # the top-level keys as before
    kernels = t["compiled_kernels"]
    assert list(kernels) == [PARTIAL, COMBINE]
    assert kernels[PARTIAL]["grid"] == [16, 32, 4] and kernels[PARTIAL]["registers"] == 255
    assert kernels[PARTIAL]["tensor_cores"] is True and kernels[COMBINE]["tensor_cores"] is False
    assert kernels[COMBINE]["num_warps"] == 4 and kernels[COMBINE]["launches"] == 1
    out = tmp_path / "compiled" / "attention"
    assert {p.name for p in out.glob("*.ptx")} == {f"{PARTIAL}.ptx", f"{COMBINE}.ptx"}


def test_watching_records_the_grid_each_jit_run_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The grid Triton evaluates inside JITFunction.run (a callable on the bound arguments, or a tuple), per launch;
    a kernel launched twice is one entry with two launches."""
    from triton.runtime.jit import JITFunction

    kernels = {n: SimpleNamespace(asm={}, metadata=SimpleNamespace(name=n)) for n in ("main", "reduce")}

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if callable(grid):
            grid = grid({"n": 64, **kwargs})
        return kernels[self]

    monkeypatch.setattr(JITFunction, "run", run)
    with dataflow.watching(ops=False) as seen:
        JITFunction.run("main", grid=lambda meta: (meta["n"] // 4, 2), warmup=False)
        JITFunction.run("reduce", grid=(16,), warmup=False)
        JITFunction.run("reduce", grid=(16,), warmup=False)
        JITFunction.run("main", grid=(1,), warmup=True)  # a warm-up compiles and launches nothing
    assert seen.grids == [[16, 2, 1], [16, 1, 1], [16, 1, 1]]
    ran = by_name(seen.compiled, seen.grids)
    assert [(n, k.grid, k.launches) for n, k in ran.items()] == [("main", [16, 2, 1], 1), ("reduce", [16, 1, 1], 2)]


def test_without_the_kernels_the_evidence_is_todays(tmp_path: Path) -> None:
    """No Facts.kernels: the last compiled kernel's facts and the declared grid, as before (the reduce kernel's
    28-register story of the issue): an underfilled grid from the declared 128 CTAs."""
    e = evidence_of(tmp_path, kernels=False)
    assert (e.kernel, e.share, e.ctas, e.registers, e.warps) == (None, 1.0, 128, 40, 4)
    assert e.instructions is not None and not e.instructions.tensor_cores
    assert any(o.name.startswith("Underfilled grid in attention: 128 CTAs") for o in opportunities.diagnose(e))


def test_every_fact_belongs_to_the_main_kernel_of_a_stage_of_two(tmp_path: Path) -> None:
    e = evidence_of(tmp_path, kernels=True)
    assert e.kernel == PARTIAL and e.share == pytest.approx(855.0 / 901.0)
    assert (e.ctas, e.warps, e.registers, e.shared_bytes, e.launches) == (2048, 8, 255, 221184, 2)
    mix = instruction_mix((PTX / f"{PARTIAL}.ptx").read_text())
    assert e.instructions == mix and e.tensor_cores is True and e.num_stages == 2 and e.spilled == 0
    assert e.where == f"attention (kernel {PARTIAL}, 95% of the stage)"
    names = [o.name for o in opportunities.diagnose(e)]
    # the GPU ran 2,048 CTAs: no underfilled grid from the declared 128, no idle tensor cores from the combine's PTX
    assert not any(n.startswith(("Underfilled grid", "Tensor cores idle")) for n in names)


def test_an_item_about_the_kernel_is_weighed_by_its_share(tmp_path: Path) -> None:
    e = evidence_of(tmp_path, kernels=True)
    saved = 0.1 * e.gap_us
    kernel = finding(e, "about the kernel", saved, ("m", "v"), "change")
    stage = finding(e, "about the stage", saved, ("m", "v"), "change", whole_stage=True)
    assert kernel.gain_pct == pytest.approx(stage.gain_pct * 855.0 / 901.0)
    assert stage.gain_pct == pytest.approx(100.0 * saved / 901.0)


def test_a_library_main_kernel_has_no_compiled_facts(tmp_path: Path) -> None:
    """When a library kernel holds most of the stage, the Triton kernel's PTX facts describe nothing of it."""
    plan = load_version("mla_decode", "v2").from_values({"b": 32, "s": 16, "t": 4096})
    stage = plan.checked_stages()[0]
    device = resolve(load_devices(), H100)
    cublas = StageKernel(name="nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", launches=1, us=2000.0,
                         grid=[2, 66, 1], block=[384, 1, 1], registers=168, shared_bytes=213188)  # fmt: skip
    kernels = StageKernels(stage=stage.name, kernels=shares([*census(stage.name).kernels, cublas]))
    facts = replace(Facts.of(device, {stage.name: two_kernel_stage(tmp_path)}), kernels={stage.name: kernels})
    f = st.timed(stage, TimingStats.of([2901.0]), device.ceilings()[stage.precision], True)
    e = facts.evidence(f, 2901.0)
    assert e.kernel == cublas.name and (e.ctas, e.warps, e.registers, e.shared_bytes) == (132, 12, 168, 213188)
    assert (e.instructions, e.tensor_cores, e.num_stages, e.spilled, e.tile) == (None, None, None, None, {})
    assert e.launches == 3


def test_the_tiling_section_labels_each_kernels_facts(tmp_path: Path) -> None:
    """One Tiling row and one Instructions line per kernel, each under its own kernel's name; the report keeps
    the contract."""
    from kbench.report.models import ProfileResult
    from kbench.report.render import render_report
    from tests.conftest import contract_problems

    tiling = Tiling(stages={"attention": two_kernel_stage(tmp_path)})
    rows = dict(tiling.rows())
    assert set(rows) == {f"attention ({PARTIAL})", f"attention ({COMBINE})"}
    assert rows[f"attention ({PARTIAL})"]["registers"] == 255 and rows[f"attention ({COMBINE})"]["registers"] == 40
    lines = dict(tiling.instructions())
    assert lines[f"attention ({PARTIAL})"].startswith("wgmma m64n256k16")
    assert lines[f"attention ({COMBINE})"].startswith("no tensor-core instruction")
    run = DATA / "examples_h100_1122" / "event-matmul-v2"
    result = ProfileResult.model_validate_json((run / "result.json").read_text())
    text = render_report(result.model_copy(update={"sections": result.sections.model_copy(update={"tiling": tiling})}))
    # the stage's num_warps=8 is the split-KV kernel's, not the combine's (4): each row shows its kernel's own
    assert f"| attention ({PARTIAL}) | {PARTIAL} | BLOCK_M=64, BLOCK_N=64 | 16, 32, 4 | 8 | 2 | 255 | 0 |" in text
    assert f"| attention ({COMBINE}) | {COMBINE} | BLOCK_M=64, BLOCK_N=64 | 32, 16, 1 | 4 | 1 | 40 | 0 |" in text
    (tmp_path / "report.md").write_text(text)
    assert contract_problems(tmp_path / "report.md") == []


def spied(monkeypatch: pytest.MonkeyPatch) -> list[Evidence]:
    """Every Evidence the catalogue is given while a mode analyses."""
    seen: list[Evidence] = []
    assess = opportunities.assess

    def spy(e: Evidence) -> Any:
        seen.append(e)
        return assess(e)

    monkeypatch.setattr(opportunities, "assess", spy)
    return seen


def test_nsys_lists_each_stages_kernels_with_the_launch_facts_the_gpu_ran() -> None:
    """The real nsys capture's stage ``streams``: a Triton add and cuBLAS's nvjet on two streams."""
    path = DATA / "timeline_h100" / "timeline.sqlite"
    frame = tl.load(path)
    kernels = stage_kernels(frame, ts.analyze(frame, "nsys", path.name), {"streams": ["add_kernel"]}, "nsys")
    streams = kernels["streams"]
    assert [k.name for k in streams.kernels] == ["add_kernel", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]
    add, nvjet = streams.kernels
    assert (add.grid, add.block, add.registers, add.shared_bytes, add.declared) == (
        [65536, 1, 1], [128, 1, 1], 26, 0, True
    )  # fmt: skip
    assert (nvjet.grid, nvjet.block, nvjet.registers, nvjet.shared_bytes, nvjet.declared) == (
        [2, 66, 1], [384, 1, 1], 168, 213188, False
    )  # fmt: skip
    assert add.launches == nvjet.launches == 1 and add.source == "nsys"
    assert add.share_pct is not None and nvjet.share_pct is not None
    assert add.share_pct + nvjet.share_pct == pytest.approx(100.0) and add.share_pct > 50.0
    device = resolve(load_devices(), H100)
    facts = replace(Facts.of(device, {}), kernels=kernels)
    f = st.timed(
        load_version("vector_add", "base").from_values({}).checked_stages()[0], TimingStats.of([500.0]), None, False
    )
    e = facts.evidence(f.model_copy(update={"name": "streams"}), 500.0)
    assert (e.kernel, e.ctas, e.warps, e.registers, e.launches) == ("add_kernel", 65536, 4, 26, 2)
    assert e.share == pytest.approx(add.share_pct / 100.0)


@pytest.mark.parametrize("capture", ["nsys_fork_join.sqlite", "torch_fork_join.json"])
def test_nsys_mode_gives_the_catalogue_each_stages_main_kernel(monkeypatch: pytest.MonkeyPatch, capture: str) -> None:
    from kbench.modes.nsys import NSYS

    seen = spied(monkeypatch)
    plan = load_version("fork_join", "base").from_values({})
    NSYS.analyse(NSYS.open(DATA / "kbench_h100" / capture), Context(plan, load_devices(), None))
    by_stage = {e.name: e for e in seen}
    assert set(by_stage) == {s.name for s in plan.checked_stages()}
    for s in plan.checked_stages():
        e = by_stage[s.name]
        assert e.kernels is not None and e.kernel in s.kernels and e.share == 1.0
        main = e.kernels.main
        assert main is not None and main.declared is True
        assert main.source == ("nsys" if capture.endswith(".sqlite") else "CUPTI")
    mm = by_stage["mm"]  # the timeline's launch facts: the occupancy calculator's inputs, and its partial wave
    assert (mm.ctas, mm.warps, mm.registers, mm.shared_bytes, mm.ctas_per_sm) == (1024, 8, 116, 98304, 2)


def test_annotation_mode_describes_the_main_kernel_not_the_fill_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real annotation run of atomics per_cta: stage ``sum`` is a zero fill (aten) and the atomic kernel."""
    from kbench.modes.counters import ANNOTATION

    folder = DATA / "validation_h100_1125" / "atomics-per_cta" / "annotation"
    params = json.loads((folder / "params.json").read_text())
    plan = load_version(params["kernel"], params["version"], [str(DATA / "validation")]).from_values(params["params"])
    tiling = {p.stem: json.loads(p.read_text()) for p in (folder / "tiling").glob("*.json")}
    seen = spied(monkeypatch)
    ctx = Context(plan, load_devices(), resolve(load_devices(), H100))
    ANNOTATION.analyse(replace(ANNOTATION.open(folder / "profile.ncu-rep"), tiling=tiling), ctx)
    (e,) = seen
    assert e.kernels is not None
    fill, atomic = sorted(e.kernels.kernels, key=lambda k: k.name)[::-1]
    assert fill.name.startswith("void at::native::vectorized_elementwise_kernel") or fill.name.startswith(
        "vectorized_elementwise_kernel"
    )
    assert atomic.name == "atomic_sum_kernel" and atomic.declared is True and fill.declared is False
    assert (atomic.grid, atomic.block, atomic.registers, atomic.shared_bytes) == ([16384, 1, 1], [128, 1, 1], 17, 16)
    assert (fill.grid, fill.registers, fill.shared_bytes, fill.source) == ([1, 1, 1], 16, 0, "ncu")
    assert e.kernel == "atomic_sum_kernel" and e.share == pytest.approx(35392.0 / (35392.0 + 2432.0))
    assert (e.ctas, e.registers, e.launches) == (16384, 17, 2)
    assert e.instructions is not None  # the atomic kernel's own PTX facts (its tiling record names it)


def test_a_one_kernel_row_shows_the_grid_triton_launched_not_the_declared_one(tmp_path: Path) -> None:
    t = two_kernel_stage(tmp_path)
    one = {**t, "compiled_kernels": {PARTIAL: t["compiled_kernels"][PARTIAL]}}
    ((name, row),) = Tiling(stages={"attention": one}).rows()
    assert name == "attention" and row["grid"] == [16, 32, 4] and t["grid"] == [128]
    ((_, old),) = Tiling(stages={"attention": {k: v for k, v in t.items() if k != "compiled_kernels"}}).rows()
    assert old["grid"] == [128]  # a record from before compiled_kernels: as it was


def test_ncu_and_nsys_see_the_same_launch_facts_of_one_stage() -> None:
    """The same program's stage ``streams`` under ncu (three runs profiled) and nsys: each kernel's grid, block,
    registers and shared memory (static + dynamic, no driver reserve) agree; ncu counts the runs it profiled."""
    from kbench.analysis import ncu
    from kbench.analysis.ncu_kernels import stage_kernels as ncu_stage_kernels

    profiled = ncu.kernels(DATA / "ncu_h100" / "sol_streams.ncu-rep")
    counted = ncu_stage_kernels([("streams", [k for k in profiled if ncu.stage_of(k) == "streams"])], {})["streams"]
    path = DATA / "timeline_h100" / "timeline.sqlite"
    frame = tl.load(path)
    timed = stage_kernels(frame, ts.analyze(frame, "nsys", path.name), {}, "nsys")["streams"]

    def launch(k: StageKernel) -> tuple[Any, ...]:
        return k.name, k.grid, k.block, k.registers, k.shared_bytes

    assert [launch(k) for k in counted.kernels] == [launch(k) for k in timed.kernels]
    assert [k.launches for k in counted.kernels] == [3.0, 3.0] and {k.source for k in counted.kernels} == {"ncu"}
    assert all(k.declared is None for k in counted.kernels)  # no plan: nothing declared


# splitk serial_combine on the H100 (tests/data/issue42_h100): stage rowsum launches partial_kernel (4096x8 CTAs)
# then combine_kernel (one CTA of one warp), which takes most of the time; its launch record describes the combine
# but carries the plan's grid (4096x8), so event mode said "Unexplained 57.9 points" where annotation found the
# one-CTA grid.
ISSUE42 = DATA / "issue42_h100"


def splitk() -> tuple[Any, Any]:
    result = json.loads((ISSUE42 / "event" / "splitk-serial_combine" / "result.json").read_text())
    plan = load_version("splitk", "serial_combine", [str(DATA / "validation")]).from_values(result["params"])
    return plan, plan.checked_stages()[0]


def splitk_evidence(kernels: StageKernels | None, tiling_mode: str = "event", **counted: Any) -> Evidence:
    _, stage = splitk()
    device = resolve(load_devices(), H100)
    tiling = json.loads((ISSUE42 / tiling_mode / "splitk-serial_combine" / "tiling" / "rowsum.json").read_text())
    facts = Facts.of(device, {"rowsum": tiling})
    if kernels is not None:
        facts = replace(facts, kernels={"rowsum": kernels})
    f = st.timed(stage, TimingStats.of([110.962]), device.ceilings()[stage.precision], True, facts.practical["fp32"])
    return facts.evidence(f, 110.962, **counted)


def test_the_real_trace_of_a_two_kernel_stage_gives_the_main_kernels_facts(tmp_path: Path) -> None:
    """The PyTorch-profiler trace of the stage run three times (its kernels' args: grid, block, registers, shared
    memory), read as nsys mode's fallback reads a trace, against the event run's real launch record."""
    import gzip

    _, stage = splitk()
    path = tmp_path / "rowsum.json"
    path.write_bytes(gzip.decompress((ISSUE42 / "traces" / "splitk-serial_combine-rowsum.trace.json.gz").read_bytes()))
    frame = tl.load(path)
    rows = [i for i, kind in enumerate(frame["kind"]) if kind == "kernel"]
    runs = [rows[i : i + 2] for i in range(0, len(rows), 2)]  # each run: partial, then combine
    assert len(runs) == 3 and [str(frame["name"][i]) for i in runs[0]] == ["partial_kernel", "combine_kernel"]
    kernels = StageKernels(stage="rowsum", kernels=kernels_of(frame, runs, stage.kernels, "CUPTI"))
    combine, partial = kernels.kernels
    assert (combine.name, combine.grid, combine.block, combine.registers) == (
        "combine_kernel",
        [1, 1, 1],
        [32, 1, 1],
        22,
    )
    assert (partial.name, partial.grid, partial.registers, partial.shared_bytes) == (
        "partial_kernel",
        [4096, 8, 1],
        30,
        16,
    )
    assert combine.declared and partial.declared and combine.launches == partial.launches == 1

    before = splitk_evidence(None)  # today: the plan's grid under the combine's facts, and no grid item
    assert before.ctas == 4096 * 8 and not any(o.name.startswith("Underfilled") for o in opportunities.diagnose(before))
    e = splitk_evidence(kernels)
    assert (e.kernel, e.ctas, e.warps, e.registers, e.shared_bytes, e.launches) == ("combine_kernel", 1, 1, 22, 0, 2)
    assert e.share == pytest.approx(66.657 / (66.657 + 44.161), rel=1e-3)
    assert e.instructions is not None and e.instructions == before.instructions  # the combine's own PTX facts
    named = "Underfilled grid in rowsum (kernel combine_kernel, 60% of the stage): 1 CTAs"
    (item,) = [o for o in opportunities.diagnose(e) if o.name.startswith(named)]
    # the combine's time spread over every SM, weighed by its share of the stage: the stage's roof is the partial
    # sums' bytes, not the combine's, so it does not bound the combine's spread (the realized gain: 58.8%, H100)
    saved = e.us - e.us / 132
    assert item.gain_pct == pytest.approx(e.gain(saved * e.share))


def test_annotation_evidence_takes_the_main_kernels_registers_not_the_stages_largest() -> None:
    """ncu's kernels.csv of the same stage (the deep-dive run): the counters' registers are the largest of the
    stage's kernels (the partial's 30); the evidence's are the combine's, the kernel that holds the time."""
    import csv

    from kbench.analysis.counters import combine
    from kbench.analysis.ncu import ALIASES, Kernel
    from kbench.analysis.ncu_kernels import stage_kernels as ncu_stage_kernels

    def number(text: str) -> float | None:
        return float(text) if text else None

    with (ISSUE42 / "ncu" / "splitk-serial_combine" / "kernels.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    ks = [
        Kernel(
            index=int(r["index"]), name=r["kernel"], nvtx=[r["nvtx"]],
            grid=tuple(int(v) for v in r["grid"].split("x")), block=tuple(int(v) for v in r["block"].split("x")),
            metrics={k: number(r[k]) for k in ALIASES if k in r},
            tensor_flops=number(r["tensor_flops"]), scalar_flops=number(r["scalar_flops"]),
        )
        for r in rows
    ]  # fmt: skip
    _, stage = splitk()
    kernels = ncu_stage_kernels([("rowsum", ks)], {"rowsum": list(stage.kernels)})["rowsum"]
    assert [(k.name, k.grid, k.registers, k.source) for k in kernels.kernels] == [
        ("combine_kernel", [1, 1, 1], 22, "ncu"),
        ("partial_kernel", [4096, 8, 1], 30, "ncu"),
    ]
    c = combine("rowsum", ks)
    assert c.registers == 30
    counted = {"ctas": c.ctas, "registers": c.registers, "launches": len(c.kernels), "ctas_per_sm": c.ctas_per_sm}
    e = splitk_evidence(kernels, "annotation", **counted)
    assert (e.kernel, e.ctas, e.registers, e.warps, e.launches) == ("combine_kernel", 1, 22, 1, 2)
    assert e.share == pytest.approx(113664.0 / (113664.0 + 48128.0))
