"""Data flow between the kernels of one stage (kbench.analysis.catalogue.exchange), on the H100 captures of issue 42
(tests/data/validation_h100_1127): the split row sum's partials (small: no item), and PyTorch's fp32 copy of x that
axpb_kernel reads (convert torch_cast: 268 MB written and read again), with the per-launch record made on a CPU from
the same plans (tests/data/dataflow_cpu)."""

from __future__ import annotations

import json
import lzma
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kbench.analysis import ncu
from kbench.analysis.catalogue import exchange
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.ncu_kernels import stage_kernels
from kbench.analysis.opportunities import Opportunity
from kbench.modes import registry
from kbench.modes.base import Context
from kbench.modes.event import EVENT
from tests.conftest import DATA
from tests.test_diagnosis import plan_of
from tests.test_report_json import _evaluate

RUNS = DATA / "validation_h100_1127"


def _report(folder: Path, tmp: Path) -> Path:
    report = tmp / "profile.ncu-rep"
    report.write_bytes(lzma.decompress((folder / "profile.ncu-rep.xz").read_bytes()))
    return report


def analysed(run: str, mode: str, tmp: Path, launches: bool = True, declare: str | None = None) -> list[Opportunity]:
    """Top 3 of a committed run re-analysed, its tiling given the launches recorded on a CPU (``launches``), its
    plan declaring the kernel ``declare`` besides its own."""
    folder = RUNS / run / mode
    tiling = {p.stem: json.loads(p.read_text()) for p in (folder / "tiling").glob("*.json")}
    cpu = DATA / "dataflow_cpu" / f"{run}.json"
    if launches and cpu.is_file():
        for stage, flow in json.loads(cpu.read_text()).items():
            assert tiling[stage]["dataflow"]["tensors"] == flow["tensors"]  # the GPU's totals, recorded on the CPU
            tiling[stage]["dataflow"]["launches"] = flow["launches"]
    plan = plan_of(folder)
    if declare is not None:
        stages = type(plan).stages
        type(plan).stages = lambda self: [replace(s, kernels=[*s.kernels, declare]) for s in stages(self)]
    try:
        device = json.loads((folder / "result.json").read_text())["device"]
        ctx = Context(plan, load_devices(), resolve(load_devices(), device))
        if mode == "event":
            capture = EVENT.open(folder / "timings.json")
            analysis = EVENT.analyse(type(capture)(files=capture.files, live=False, tiling=tiling), ctx)
        else:
            backend = registry.get(mode)
            analysis = backend.analyse(replace(backend.open(_report(folder, tmp)), tiling=tiling), ctx)
    finally:
        if declare is not None:
            type(plan).stages = stages
    return analysis.figures.opportunities


def _exchanged(items: list[Opportunity]) -> list[Opportunity]:
    return [o for o in items if o.metric.endswith(".exchanged_bytes_pct")]


def test_ncu_measures_the_bytes_each_kernel_of_a_stage_reads_and_writes(tmp_path: Path) -> None:
    ks = ncu.kernels(_report(RUNS / "splitk-serial_combine" / "annotation", tmp_path))
    (stage,) = stage_kernels([("rowsum", ks)], {}).values()
    by = {k.name: k for k in stage.kernels}
    partial, combine = by["partial_kernel"], by["combine_kernel"]
    assert partial.dram_read_bytes == pytest.approx(4096 * 8192 * 4, rel=0.02)  # x, once
    assert combine.dram_read_bytes is not None and combine.dram_read_bytes < 1e6  # the 131-KB partials at most
    assert partial.dram_bytes == pytest.approx((partial.dram_read_bytes or 0) + (partial.dram_write_bytes or 0))
    assert partial.bytes_by == "ncu: dram__bytes_read.sum and dram__bytes_write.sum"


def test_the_recorded_launches_show_what_passes_between_kernels() -> None:
    flow = json.loads((DATA / "dataflow_cpu" / "convert-torch_cast.json").read_text())["axpb"]
    (x,) = exchange.exchanges(flow)
    assert (x.tensor, x.writer, x.readers, x.written, x.output) == (
        "temporary 1",
        "aten::_to_copy",
        (("axpb_kernel", 4.0 * 2**26),),
        4.0 * 2**26,
        False,
    )
    # the stage's totals alone (a capture made before launches were recorded): its written tensor is its output
    assert exchange.exchanges({**flow, "launches": None}) == []


@pytest.mark.parametrize("mode", ["event", "annotation"])
@pytest.mark.parametrize("run", ["splitk-serial_combine", "splitk-parallel_combine"])
def test_a_split_passing_small_partials_gets_no_item(run: str, mode: str, tmp_path: Path) -> None:
    # its recorded totals: partials (131 KB) written, not the output, in a stage of two kernels: 262 KB through
    # DRAM at most against the 134 MB the stage reads, under a twentieth
    folder = RUNS / run / mode
    flow = json.loads((folder / "tiling" / "rowsum.json").read_text())["dataflow"]
    (x,) = exchange.exchanges(flow)
    assert (x.tensor, x.written, x.source) == ("partials", 4096 * 8 * 4, exchange.TOTALS)
    assert _exchanged(analysed(run, mode, tmp_path)) == []


@pytest.mark.parametrize("mode", ["event", "annotation"])
def test_the_partials_recorded_launch_by_launch_are_priced_small(mode: str, tmp_path: Path) -> None:
    flow = json.loads((DATA / "dataflow_cpu" / "splitk-serial_combine.json").read_text())["rowsum"]
    (x,) = exchange.exchanges(flow)
    assert (x.tensor, x.writer, x.readers) == ("partials", "partial_kernel", (("combine_kernel", 131072.0),))
    assert _exchanged(analysed("splitk-serial_combine", mode, tmp_path)) == []


@pytest.mark.parametrize("mode", ["event", "annotation"])
def test_a_kernel_the_plan_does_not_declare_is_left_to_its_own_item(mode: str, tmp_path: Path) -> None:
    # PyTorch's copy is not the plan's: kernels.undeclared prices removing it whole, no second item for its output
    items = analysed("convert-torch_cast", mode, tmp_path)
    assert _exchanged(items) == [] and any(o.metric == "axpb.undeclared_kernel_pct" for o in items)


@pytest.mark.parametrize("mode", ["event", "annotation"])
def test_two_kernels_exchanging_an_intermediate_are_named_and_priced_from_its_bytes(mode: str, tmp_path: Path) -> None:
    """The plan declares its cast (as a two-kernel design would): the copy writes x in fp32 (268 MB) and axpb_kernel
    reads it back; fused, 537 MB never move: 173 us at the practical 3095 GB/s of the stage's 387 us (its twin that
    converts in its loads took 133 us: 65% less). Annotation mode bounds each side by ncu's bytes of each kernel."""
    with_launches = analysed("convert-torch_cast", mode, tmp_path, declare="unrolled_elementwise_kernel")
    (o,) = _exchanged(with_launches)
    assert (
        o.name.startswith("Kernels aten::_to_copy and axpb_kernel of axpb exchange 5")
        and "(aten::_to_copy writes temporary 1, axpb_kernel reads it, recorded launch by launch at capture;" in o.name
    )
    assert o.change is not None and o.change.startswith("fuse aten::_to_copy and axpb_kernel into one kernel")
    assert o.stage == "axpb" and o.kernel == "aten::_to_copy" and o.named
    assert o.inputs["exchanged_bytes"] == pytest.approx(2 * 4.0 * 2**26, rel=0.05)  # ncu: 516 MB
    assert o.inputs["practical_gbps"] == 3095.1  # the H100's fastest measured stream (conf/devices.json)
    assert _evaluate(o.formula, o.inputs) == pytest.approx(o.gain_pct)
    assert 40.0 < o.gain_pct < 50.0  # realized by the twin: 65%
    assert ("bounded by the kernels' measured DRAM bytes" in o.name) == (mode == "annotation")
    # without the per-launch record the capture's totals show no intermediate (the copy is a temporary)
    assert _exchanged(analysed("convert-torch_cast", mode, tmp_path, False, "unrolled_elementwise_kernel")) == []


def test_a_record_before_launches_were_recorded_names_the_stages_kernels() -> None:
    flow: dict[str, Any] = {
        "kernels": 2,
        "tensors": [
            {"name": "q", "bytes": 1e6, "read": True, "written": False},
            {"name": "scores", "bytes": 6.7e7, "read": False, "written": True},
            {"name": "out", "bytes": 1e6, "read": False, "written": True, "output": True},
        ],
    }
    (x,) = exchange.exchanges(flow)
    assert (x.tensor, x.writer, x.source) == ("scores", "", exchange.TOTALS)
    assert exchange.exchanges({**flow, "kernels": 1}) == []


def test_a_hostile_data_flow_is_read_in_linear_time() -> None:
    # tiling/<stage>.json is read back from a run folder: two launches of 20,000 tensors each (a 2 MB record) hung
    # the analysis (every write against every later write and read), 60,000 launches took 24 s
    import time

    n = 20_000
    wide = {
        "tensors": [],
        "launches": [
            {"kernel": "a", "reads": [], "writes": [{"name": f"t{i}", "bytes": 1} for i in range(n)]},
            {
                "kernel": "b",
                "reads": [{"name": f"t{i}", "bytes": 2} for i in range(n)],
                "writes": [{"name": f"u{i}", "bytes": 1} for i in range(n)],
            },
        ],
    }
    long = {"tensors": [], "launches": [{"kernel": "a", "reads": [], "writes": [{"name": "c", "bytes": 1}]}] * 60_000}
    began = time.perf_counter()
    found = exchange.exchanges(wide)
    assert len(found) == n and found[0] == exchange.Exchange("t0", "a", 1.0, (("b", 2.0),), False, exchange.LAUNCHES)
    assert exchange.exchanges(long) == []
    assert time.perf_counter() - began < 3.0


def test_a_loop_of_launches_sums_each_pair_once() -> None:
    # the same writer and reader launched twice (a loop): one exchange, its bytes summed; a tensor written again
    # before it is read passes nothing from its first write
    pair = [
        {"kernel": "a", "reads": [], "writes": [{"name": "s", "bytes": 4}]},
        {"kernel": "b", "reads": [{"name": "s", "bytes": 4}], "writes": [{"name": "o", "bytes": 1}]},
    ]
    flow = {"tensors": [{"name": "o", "output": True}], "launches": [*pair, *pair]}
    assert exchange.exchanges(flow) == [exchange.Exchange("s", "a", 8.0, (("b", 8.0),), False, exchange.LAUNCHES)]
    rewritten = {"tensors": [], "launches": [pair[0], pair[0], pair[1]]}
    assert exchange.exchanges(rewritten) == [exchange.Exchange("s", "a", 4.0, (("b", 4.0),), False, exchange.LAUNCHES)]
