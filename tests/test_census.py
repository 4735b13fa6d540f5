"""The kernels census (event mode): parsing a real PyTorch-profiler trace from the H100, the kernels model it gives,
the two catalogue entries built on it (an undeclared kernel, host time inside a stage), and what report.md and
report.json show of it."""

from __future__ import annotations

import copy
import gzip
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from kbench import pipeline
from kbench.analysis import opportunities as op
from kbench.analysis.catalogue import kernels as catalogue
from kbench.analysis.census import API_CATS, MARK, TRITON, facts, stage_kernels
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.figures import Facts
from kbench.analysis.kernels import short_name
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.modes.base import Capture, Context, RunOptions
from kbench.modes.event import EVENT
from kbench.plan.discovery import load_version
from kbench.report.render import num
from tests.conftest import DATA, contract_problems
from tests.pipeline_fakes import offline_gpu, replay

TRACE = DATA / "census_h100" / "kineto_trace.json"
BASE = 4470823692000.0  # the trace's timestamps are microseconds from this
# the two loop iterations of workloads.py in the trace (from the first add_kernel launch of each to the next)
ITERATIONS = ((2720.0, 1530.0), (4250.0, 1295.0))
HEALTHY = DATA / "validation_h100_1125" / "tile_mm-base" / "event" / "timings.json"  # one kernel, no host work
ROOF = Ceilings(tflops=600.0, gbps=3000.0, source="test")


def trace() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(TRACE.read_text())
    return loaded


def marked() -> dict[str, Any]:
    """The real trace with each loop iteration inside a census annotation, as kbench.capture.census marks a run."""
    t = copy.deepcopy(trace())
    for i, (start, dur) in enumerate(ITERATIONS):
        t["traceEvents"].append(
            {"ph": "X", "cat": "user_annotation", "name": f"{MARK}{i}", "pid": 1963, "tid": 1963,
             "ts": BASE + start, "dur": dur, "args": {"External id": 1000 + i}}
        )  # fmt: skip
    return t


def item(record: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [i for i in record["items"] if i["name"] == name]
    assert len(found) == 1, name
    return found[0]


def test_a_real_trace_gives_each_gpu_item_its_launch_facts_and_the_op_that_launched_it() -> None:
    record = facts(trace())
    assert record["runs"] == 1 and record["host_us"] is None and record["unplaced"] == 0
    mm = item(record, "mm_kernel")
    assert (mm["grid"], mm["block"], mm["registers"], mm["shared_bytes"]) == ([32, 32, 1], [256, 1, 1], 110, 98304)
    assert mm["op"] == TRITON and mm["api"] == "cuLaunchKernelEx" and mm["launches"] == [2]
    assert abs(mm["us"][0] - (242.658 + 275.777)) < 1e-6
    nvjet = item(record, "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT")
    assert nvjet["op"] == "aten::mm" and nvjet["api"] == "cuLaunchKernelEx"  # cuBLAS through the driver, under an op
    (copies,) = [i for i in record["items"] if "direct_copy_kernel_cuda" in i["name"]]
    assert copies["op"] == "aten::to > aten::copy_" and copies["launches"] == [5]
    readback = item(record, "Memcpy DtoH (Device -> Pinned)")
    assert readback["kind"] == "memcpy" and readback["op"] == "aten::item > aten::_local_scalar_dense"
    assert record["api"]["cudaStreamSynchronize"] == [2.0] and record["api"]["cuLaunchKernelEx"] == [10.0]
    assert record["api"]["cudaMalloc"] == [2.0]
    assert len(json.dumps(record)) < TRACE.stat().st_size / 4  # kernels.json keeps facts, not the trace


def test_runs_are_split_by_their_annotations() -> None:
    record = facts(marked())
    assert record["runs"] == 2 and record["host_us"] == [1530.0, 1295.0]
    assert item(record, "add_kernel")["launches"] == [2, 2]
    assert item(record, "mm_kernel")["us"] == pytest.approx([242.658, 275.777])
    assert item(record, "Memset (Device)")["op"] == "aten::mm"
    assert record["api"]["cudaMalloc"] == [2.0, 0.0]  # the caching allocator kept the first run's blocks
    assert record["api"]["cudaDeviceSynchronize"] == [1.0, 1.0]
    assert record["unplaced"] == 25  # the setup's and the check's items, outside both runs
    assert "Memcpy DtoH (Device -> Pinned)" not in {i["name"] for i in record["items"]}

    sk = stage_kernels("loop", record, ["add_kernel", "mm_kernel", "rowsum_kernel"], [3000.0, 3100.0], [2000.0])
    add = next(k for k in sk.kernels if k.name == "add_kernel")
    assert add.launches == 2 and add.us == pytest.approx(statistics.median([280.321 + 272.193, 282.977 + 274.018]))
    assert sum(k.share_pct or 0.0 for k in sk.kernels) == pytest.approx(100.0)
    assert [k.declared for k in sk.kernels if k.name.startswith(("nvjet", "Memset"))] == [False, False]
    assert sk.host is not None and sk.host.events_us == 3050.0 and sk.host.span_us == pytest.approx(1412.5)
    work = sk.host_work()
    assert work["synchronizations"] == 1 and work["allocations"] == 1 and work["launches"] == 5
    assert stage_kernels("loop", record).kernels[0].declared is None  # the plan declares none


def test_long_library_names_are_cut_to_what_tells_them_apart() -> None:
    names = {i["name"] for i in facts(trace())["items"]}
    short = {short_name(n) for n in names}
    assert "unrolled_elementwise_kernel<direct_copy_kernel_cuda>" in short
    assert {"reduce_kernel<NormTwoOps>", "reduce_kernel<sum_functor>", "reduce_kernel<MaxNanFunctor>"} <= short
    assert {"mm_kernel", "Memcpy DtoH (Device -> Pinned)"} <= short
    assert max(len(s) for s in short) <= 60


def evidence(us: float, sk: Any, total: float | None = None, nbytes: float = 1e8) -> op.Evidence:
    f = StageFigures(
        name=sk.stage, precision="bf16", flops=1e9, dram_bytes=nbytes, timing=TimingStats.of([us]), duration_us=us,
        tflops=None, gbps=None, intensity=10.0, bottleneck="Memory",
    )  # fmt: skip
    return op.Evidence(stage=f, total_us=total or us, practical=ROOF, kernels=sk)


def one(name: str, us: float, launches: int = 1, op_: str | None = TRITON, kind: str = "kernel") -> dict[str, Any]:
    return {"kind": kind, "name": name, "grid": [128, 1, 1], "block": [128, 1, 1], "registers": 40,
            "shared_bytes": 0, "op": op_, "launches": [launches] * 3, "us": [us] * 3}  # fmt: skip


def test_a_healthy_one_kernel_stage_gets_no_host_item_and_no_undeclared_item() -> None:
    timed = json.loads(HEALTHY.read_text())["stages"]["mm"]
    record = {"runs": 3, "items": [one("mm_kernel", 29.3)], "api": {"cuLaunchKernelEx": [1, 1, 1]}, "host_us": None}
    sk = stage_kernels("mm", record, ["mm_kernel"], timed["samples_us"], timed["cupti_us"])
    assert sk.host is not None and sk.host.gap_pct > 15.0  # the H100's 35.6 us by events against 29.3 us of kernel
    e = evidence(statistics.median(timed["cupti_us"]), sk)
    assert catalogue.host_time(e) is None and catalogue.undeclared(e) is None
    assert not [o for o in op.diagnose(e) if o.metric.endswith(("host_gap_pct", "undeclared_kernel_pct"))]


def test_an_undeclared_conversion_kernel_is_named_with_its_op_and_its_time_as_the_gain() -> None:
    # issue 42's case: a kernel the plan never declared took 548 of a stage's 638 us
    items = [one("mm_kernel", 90.0), one(NAME_COPY, 548.0, op_="aten::to > aten::copy_")]
    record = {"runs": 3, "items": items, "api": {}, "host_us": None}
    sk = stage_kernels("s", record, ["mm_kernel"])
    e = evidence(638.0, sk, total=1000.0)
    found = catalogue.undeclared(e)
    assert found is not None and found.metric == "s.undeclared_kernel_pct" and found.value == "85.9%"
    assert found.name.startswith("Kernel unrolled_elementwise_kernel<direct_copy_kernel_cuda> is not the plan's: 86%")
    assert "launched by aten::to > aten::copy_" in found.name
    assert found.gain_pct == pytest.approx(100.0 * 638.0 * 548.0 / 638.0 / 1000.0)  # whole stage, not weighed
    assert "`aten::to > aten::copy_` converts or copies" in (found.change or "") and "setup" in (found.change or "")
    assert catalogue.undeclared(evidence(638.0, stage_kernels("s", record, []), total=1000.0)) is None
    small = {"runs": 3, "items": [one("mm_kernel", 600.0), one(NAME_COPY, 38.0, op_="aten::to")], "api": {}}
    assert catalogue.undeclared(evidence(638.0, stage_kernels("s", small, ["mm_kernel"]))) is None  # 6%: under 10%


NAME_COPY = (
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, 4,"
    " TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::"
    "LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, ...)"
)


def test_a_read_back_inside_the_stage_is_host_time_with_the_gap_as_its_gain() -> None:
    items = [
        one("k1", 100.0),
        one("Memcpy DtoH (Device -> Pinned)", 2.0, op_="aten::item > aten::_local_scalar_dense", kind="memcpy"),
        one("k2", 98.0),
    ]
    api = {"cuLaunchKernelEx": [2] * 3, "cudaMemcpyAsync": [1] * 3, "cudaStreamSynchronize": [1] * 3}
    record = {"runs": 3, "items": items, "api": api, "host_us": [310.0] * 3}
    sk = stage_kernels("s", record, ["k1", "k2"], [300.0] * 5, [200.0] * 5)
    found = catalogue.host_time(evidence(200.0, sk, total=400.0))
    assert found is not None and found.metric == "s.host_gap_pct" and found.value == "33.3%"
    assert "100.0 us per run" in found.name and "1 synchronization, 1 host-device copy, 2 launches" in found.name
    assert found.gain_pct == pytest.approx(100.0 * 100.0 / 500.0)  # the plan with this stage at its events time
    assert ".item()" in (found.change or "")
    # the same API calls but a gap of 5%: the timer's overhead, not an item
    assert catalogue.host_time(evidence(200.0, stage_kernels("s", record, [], [210.0], [200.0]))) is None
    # host time is said even where the kernels are at their roof (5.7e8 bytes at 3,000 GB/s: 190 of 200 us)
    at_roof = op.diagnose(evidence(200.0, sk, total=400.0, nbytes=5.7e8))
    assert [o.metric for o in at_roof] == ["s.practical_roof_pct", "s.host_gap_pct"]


@pytest.fixture
def census_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """matmul v2's real event-mode run on the H100 (timings with CUPTI), with the census record of the real trace's
    two iterations as its stage's kernels.json; replayed through the event pipeline."""
    folder = tmp_path / "recorded"
    folder.mkdir()
    source = DATA / "validation_h100_1125" / "matmul-v2" / "event"
    shutil.copy(source / "timings.json", folder / "timings.json")
    (folder / "kernels.json").write_text(json.dumps({"runs": 2, "stages": {"mm": facts(marked())}}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path / ".cache"))
    offline_gpu(monkeypatch)
    params = json.loads((source / "params.json").read_text())
    plan = load_version(params["kernel"], params["version"]).from_values(params["params"])
    replay(monkeypatch, folder / "timings.json")
    opts = RunOptions(out_root=Path("out"), check=False, progress=lambda msg: None, bench_runs=100)
    return Path(pipeline.profile("event", plan, opts).out_dir)


def test_the_report_lists_each_stages_kernels_after_the_root_cause(census_run: Path) -> None:
    text = (census_run / "report.md").read_text()
    assert contract_problems(census_run / "report.md") == []
    stages = text[text.index("Root cause:") : text.index("## Top 3")]
    assert (
        "| Stage | Kernel | Launches | Grid | Block | Registers | Time (us) | Share (%) | Declared | Launched by |"
        in stages
    )
    assert "| mm | mm_kernel | 1 | 32x32x1 | 256x1x1 | 110 | 259.22 |" in stages
    assert "| mm | nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT | 1 | 2x66x1 | 384x1x1 | 168 |" in stages
    assert "| no | aten::mm |" in stages and "| yes | Triton launch |" in stages
    assert "| mm | (1 more) | | | | | 3.82 | | | |" in stages  # four rows a stage; the memset summed below them
    assert (
        "- mm: 220.35 us by CUDA events against 202.04 us of kernels (CUPTI, the Duration above), 8.3% outside"
        in stages
    )
    assert "per run: 1 synchronization, 1 allocation, 5 launches" in stages
    # add_kernel (Triton, not declared) holds the most time: the undeclared item names it
    assert "Kernel add_kernel is not the plan's" in text
    assert "2 launches per run, a Triton launch (no PyTorch op)); 2 more undeclared over 10%" in text
    assert (census_run / "kernels.json").exists()


def test_report_json_keeps_every_kernel_whole_with_its_source(census_run: Path) -> None:
    data = json.loads((census_run / "report.json").read_text())
    (stage,) = data["sections"]["kernels"]
    assert stage["stage"] == "mm" and len(stage["kernels"]) == 5
    mm = next(k for k in stage["kernels"] if k["name"] == "mm_kernel")
    assert mm["us"]["source"] == "measured" and mm["us"]["by"].startswith("CUPTI:")
    assert mm["share_pct"]["source"] == "derived" and mm["grid"] == [32, 32, 1] and mm["declared"] is True
    # every row report.md shows is in report.json with the same values
    md = (census_run / "report.md").read_text()
    for k in stage["kernels"][:4]:
        row = f"| mm | {k['short']} | {k['launches']['value']:g} | {'x'.join(map(str, k['grid']))} |"
        assert row in md and f"| {num(k['us']['value'])} | {num(k['share_pct']['value'], 1)} |" in md
    host = stage["host"]
    assert host["events_us"]["source"] == "measured" and host["gap_us"]["source"] == "derived"
    assert host["api"]["cudaDeviceSynchronize"] == 1.0


def test_the_tiling_facts_name_the_kernel_they_describe() -> None:
    sk = stage_kernels("loop", facts(marked()), ["add_kernel", "mm_kernel", "rowsum_kernel"])
    said = sk.describes("mm_kernel")
    assert said is not None and said.startswith("loop: the facts above describe mm_kernel, 18.0% of the stage's kernel")
    assert "launched with grid 32x32x1 (5 kernel(s) ran)" in said
    assert sk.describes("other_kernel") == "loop: other_kernel was not among the kernels CUPTI saw in the stage"
    assert sk.describes(None) is None
    # the evidence describes the stage's main kernel (the most GPU time), with or without a launch record, and the
    # grid it really ran: never the record's declared grid of 128
    for t in ({}, {"loop": {"kernel": "mm_kernel", "grid": [128, 1, 1], "num_warps": 8}}):
        e = Facts(kernels={"loop": sk}, tiling=t).evidence(figures("loop"), 1000.0)
        assert e.kernel == "add_kernel" and e.share == pytest.approx(0.385, abs=0.001) and e.ctas == 65536
        assert e.where == "loop (kernel add_kernel, 39% of the stage)"


def figures(name: str) -> StageFigures:
    return StageFigures(
        name=name, precision="bf16", flops=1e9, dram_bytes=1e8, timing=TimingStats.of([100.0]), duration_us=100.0,
        tflops=None, gbps=None, intensity=10.0, bottleneck="Memory",
    )  # fmt: skip


def test_the_census_runs_a_real_profiler_session_and_says_why_when_it_measures_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On this CPU: the Kineto session, the runs' annotations and the saved trace are real; no GPU work is recorded."""
    import torch

    from kbench.capture import census

    if not torch.cuda.is_available():
        failed = census.census(lambda: torch.ones(4) + 1)
        assert isinstance(failed, str) and failed.startswith("the PyTorch profiler failed: ")
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    seen: list[dict[str, Any]] = []

    def kept(t: dict[str, Any]) -> dict[str, Any]:
        seen.append(t)
        return facts(t)

    monkeypatch.setattr(census, "facts", kept)
    x = torch.ones(1000)
    said = census.census(lambda: (x * 2).sum())
    marks = [e["name"] for e in seen[0]["traceEvents"] if e.get("cat") == "user_annotation"]
    assert marks == [f"{MARK}{i}" for i in range(census.RUNS)]
    assert any(e.get("cat") == "cpu_op" and e["name"] == "aten::mul" for e in seen[0]["traceEvents"])
    if not torch.cuda.is_available():
        assert said == "the profiler recorded no GPU work for the stage"


def test_under_cuda_graph_the_census_is_not_taken_and_the_report_says_why(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbench.modes.event import NO_CENSUS_GRAPH

    offline_gpu(monkeypatch)
    folder = DATA / "event_h100" / "vector_add_base"
    params = json.loads((folder / "params.json").read_text())
    plan = load_version(params["kernel"], params["version"]).from_values(params["params"])
    replay(monkeypatch, folder / "timings.json")
    opts = RunOptions(out_root=Path("out"), check=False, progress=lambda msg: None, bench_runs=100, cuda_graph=True)
    run = Path(pipeline.profile("event", plan, opts).out_dir)
    assert json.loads((run / "kernels.json").read_text())["stages"] == {"add": {"not_measured": NO_CENSUS_GRAPH}}
    text = (run / "report.md").read_text()
    assert f"- Kernels of add not measured: {NO_CENSUS_GRAPH}" in text and "| Stage | Kernel | Launches |" not in text
    assert contract_problems(run / "report.md") == []


# issue 42's pairs on the H100: scripts/census-trace.py traces (3 runs of a stage in one profiler session, CPU ops and
# CUDA activity) and the event-mode runs of the same versions (tests/data/issue42_h100)
ISSUE42 = DATA / "issue42_h100"


def census_of(name: str, runs: int = 3, drop: str | None = None) -> dict[str, Any]:
    """A census-trace.py trace as kbench's census records it: the script's sync after its runs and the profiler's own
    (the last two cudaDeviceSynchronize, outside kbench's run annotations) left out, each run marked from the start
    of the outermost op around its first launch; ``drop``: an API call left out everywhere (a twin without it)."""
    t = json.loads(gzip.decompress((ISSUE42 / "traces" / f"{name}.trace.json.gz").read_bytes()))
    calls = sorted((e for e in t["traceEvents"] if e.get("cat") in API_CATS), key=lambda e: float(e["ts"]))
    gone = {id(e) for e in calls[-2:]} | {id(e) for e in calls if e["name"] == drop}
    assert [e["name"] for e in calls[-2:]] == ["cudaDeviceSynchronize"] * 2
    events = [e for e in t["traceEvents"] if id(e) not in gone]
    calls = [e for e in calls if id(e) not in gone]
    launches = [e for e in calls if "Launch" in e["name"] or "Memset" in e["name"]]
    per = len(launches) // runs
    assert per * runs == len(launches)
    ops = [e for e in events if e.get("cat") == "cpu_op"]

    def start(call: dict[str, Any]) -> float:
        around = [float(o["ts"]) for o in ops if float(o["ts"]) <= float(call["ts"]) <= float(o["ts"]) + o["dur"]]
        return min([*around, float(call["ts"])]) - 0.001

    starts = [start(launches[i * per]) for i in range(runs)]
    ends = [*starts[1:], max(float(e["ts"]) + e["dur"] for e in calls) + 0.001]
    events += [
        {"ph": "X", "cat": "user_annotation", "name": f"{MARK}{i}", "pid": launches[0]["pid"],
         "tid": launches[0]["tid"], "ts": starts[i], "dur": ends[i] - starts[i]}
        for i in range(runs)
    ]  # fmt: skip
    return facts({**t, "traceEvents": events})


def analysed(run: str, record: dict[str, Any], tmp: Path) -> Any:
    """The event-mode run ``run`` of issue 42 re-analysed here with ``record`` as its stage's census."""
    folder = ISSUE42 / "event" / run
    result = json.loads((folder / "result.json").read_text())
    plan = load_version(result["kernel"], result["version"], [str(DATA / "validation")]).from_values(result["params"])
    (stage,) = [s.name for s in plan.checked_stages()]
    (tmp / "kernels.json").write_text(json.dumps({"runs": 3, "stages": {stage: record}}))
    tiling = {p.stem: json.loads(p.read_text()) for p in (folder / "tiling").glob("*.json")}
    capture = Capture(files={"timings": folder / "timings.json", "kernels": tmp / "kernels.json"}, tiling=tiling)
    return EVENT.analyse(capture, Context(plan, load_devices(), resolve(load_devices(), result["device"])))


def realized_pct(before: str, after: str) -> float:
    """What the fixed twin saved, by the events' time of its stage (what a caller waits for)."""
    times: list[float] = [
        statistics.median(next(iter(json.loads((ISSUE42 / "event" / r / "timings.json").read_text())["stages"]
                                    .values()))["samples_us"])
        for r in (before, after)
    ]  # fmt: skip
    return 100.0 * (1.0 - times[1] / times[0])


def test_the_issue42_traces_give_each_kernel_its_op() -> None:
    convert = census_of("convert-torch_cast-axpb")
    assert [(i["name"][:40], i["op"], i["launches"]) for i in convert["items"]] == [
        ("void at::native::unrolled_elementwise_ke", "aten::to > aten::copy_", [1, 1, 1]),
        ("axpb_kernel", TRITON, [1, 1, 1]),
    ]
    assert convert["api"] == {"cudaLaunchKernel": [1.0] * 3, "cuLaunchKernelEx": [1.0] * 3}
    absmax = census_of("absmax-torch_abs-amax")
    assert [i["op"] for i in absmax["items"]] == ["aten::abs", TRITON, "aten::zero_ > aten::fill_"]
    mla = census_of("mla_decode-base-attention")
    assert {i["op"] for i in mla["items"]} >= {"aten::softmax > aten::_softmax", "aten::bmm", "aten::to > aten::copy_"}
    sync = census_of("hostsync-per_chunk-axpb")
    assert sync["api"] == {"cuLaunchKernelEx": [4.0] * 3, "cudaDeviceSynchronize": [4.0] * 3}
    split = census_of("splitk-serial_combine-rowsum")
    assert [(i["name"], i["grid"]) for i in split["items"]] == [
        ("combine_kernel", [1, 1, 1]),
        ("partial_kernel", [4096, 8, 1]),
    ]


@pytest.mark.parametrize(
    ("run", "twin", "trace", "op_", "share"),
    [
        ("convert-torch_cast", "convert-in_kernel", "convert-torch_cast-axpb", "aten::to > aten::copy_", 53.7),
        ("absmax-torch_abs", "absmax-fused", "absmax-torch_abs-amax", "aten::abs", 63.9),
    ],
)
def test_an_undeclared_framework_kernel_is_top1_with_its_time_as_the_gain(
    run: str, twin: str, trace: str, op_: str, share: float, tmp_path: Path
) -> None:
    figures = analysed(run, census_of(trace), tmp_path).figures
    first = figures.opportunities[0]
    assert first.metric.endswith(".undeclared_kernel_pct") and first.value == f"{share:.1f}%"
    assert f"launched by {op_}" in first.name and f"`{op_}`" in (first.change or "")
    assert first.gain_pct == pytest.approx(share, abs=0.05)  # one stage: its share is the plan's share
    assert 0.67 <= first.gain_pct / realized_pct(run, twin) <= 1.5  # what the fixed twin saved (65.5%, 66.4%)


def test_a_stage_whose_kernels_the_plan_declares_gets_no_undeclared_item(tmp_path: Path) -> None:
    for run, trace in (("splitk-serial_combine", "splitk-serial_combine-rowsum"),
                       ("scalar_atomic-per_program", "scalar_atomic-per_program-sum")):  # fmt: skip
        found = analysed(run, census_of(trace), tmp_path).figures.opportunities
        assert not [o for o in found if o.metric.endswith(".undeclared_kernel_pct")], run  # the fill: 0.1%


def test_syncs_inside_a_stage_are_host_time_and_its_twin_without_them_is_not(tmp_path: Path) -> None:
    figures = analysed("hostsync-per_chunk", census_of("hostsync-per_chunk-axpb"), tmp_path).figures
    (host,) = [o for o in figures.opportunities if o.metric == "axpb.host_gap_pct"]
    assert host.value == "94.4%" and "per run: 4 synchronizations, 4 launches" in host.name
    assert host.gain_pct == pytest.approx(100.0 * (238.9 - 13.5) / 238.9, abs=0.2)  # the stage at its events time
    assert 0.67 <= host.gain_pct / realized_pct("hostsync-per_chunk", "hostsync-no_sync") <= 1.5
    # the twin: the same launches without the syncs, 21.7 us by events against 13.2 us of kernels (39%): no item
    twin = census_of("hostsync-per_chunk-axpb", drop="cudaDeviceSynchronize")
    calm = analysed("hostsync-no_sync", twin, tmp_path).figures
    assert calm.kernels[0].host is not None and calm.kernels[0].host.gap_pct > 35.0
    assert not [o for o in calm.opportunities if o.metric.endswith(("host_gap_pct", "undeclared_kernel_pct"))]
