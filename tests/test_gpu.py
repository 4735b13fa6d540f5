"""GPU tier: the event-mode path end to end on a real CUDA device (skipped without one)."""

from __future__ import annotations

import itertools
import json
import logging
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kbench.report.mode_sections import ModeSections
from tests.conftest import contract_problems


def tiling(r: Any) -> dict[str, Any]:
    assert r.sections.tiling is not None
    stages: dict[str, Any] = r.sections.tiling.stages
    return stages


pytestmark = pytest.mark.gpu


def _vector_add(n: int = 1 << 22):
    from kbench.plan.discovery import load_version

    return load_version("vector_add").from_values({"n": n})


def test_event_mode_writes_a_contract_report(isolated: Path) -> None:
    from kbench.api import event_profile_plan

    r = event_profile_plan(_vector_add(), out_dir="prof", bench_runs=20)
    run = Path(r.out_dir)
    assert run.parent == Path("prof/event/vector_add/n4194304_float32")
    assert contract_problems(run / "report.md") == []
    assert (run / "report.md").read_text() == r.report_md
    params = json.loads((run / "params.json").read_text())
    assert params["status"] == "ok" and params["params"] == {"n": 4194304, "dtype": "float32"}
    assert params["correctness"].startswith("PASS")
    stage = r.stage("add")
    assert stage.duration_us > 0 and stage.timing.n == 20
    assert stage.occ_pct is None  # PM sampling offers no warps-active metric on GH100
    sampled = json.loads((run / "samples.json").read_text())
    if "not_available" in sampled:  # no cupti-python here: event mode as before, and the Environment says why
        assert stage.tc_pct is None and stage.dram_pct is None
        assert any(n.startswith("Counters (TC%, DRAM%): n/a in this run:") for n in r.notes)
    else:
        assert any(n.startswith("Counters (TC%, DRAM%) sampled in-process") for n in r.notes)
        if stage.duration_us >= sampled["sampler"]["interval_ns"] / 1e3:  # 48 MiB moved at the DRAM roof
            assert stage.dram_pct is not None and stage.dram_pct > 50 and stage.tc_pct == 0.0
        else:  # ~17 us on an H100: shorter than one 20-us sample, so no figure, and the Environment says why
            assert stage.dram_pct is None and any("less than one 20-us sample" in n for n in r.notes)
    assert "GPU held before each start" in r.timing_method and "L2 flushed" in r.timing_method
    compiled = {p.suffix for p in (run / "compiled" / "add").iterdir()}
    assert {".ttir", ".ttgir", ".llir", ".ptx", ".cubin", ".json"} <= compiled
    tiling = json.loads((run / "tiling" / "add.json").read_text())
    assert tiling["registers"] > 0 and tiling["grid"] == [4096]
    # the data flow watched on the first launch: a and b read, c written (the output), 16 MiB each
    flow = {t["name"]: t for t in tiling["dataflow"]["tensors"]}
    assert tiling["dataflow"]["kernels"] == 1
    assert {n: (t["read"], t["written"], t["output"], t["bytes"]) for n, t in flow.items()} == {
        "a": (True, False, False, 4 << 22),
        "b": (True, False, False, 4 << 22),
        "c": (False, True, True, 4 << 22),
    }
    timed = json.loads((run / "timings.json").read_text())["stages"]["add"]
    # the stage's duration is CUPTI's; CUDA events are kept beside it (launch and event overhead on top)
    assert len(timed["samples_us"]) == 20 and len(timed["cupti_us"]) == 20
    assert statistics.median(timed["cupti_us"]) == stage.timing.median_us
    # a fixed few microseconds of launch and event overhead, not a share (an 11.8-us stage on an H200 read 0.80)
    events = statistics.median(timed["samples_us"])
    assert stage.timing.median_us <= 1.01 * events and events - stage.timing.median_us < 5.0
    assert r.timing_method.startswith("stage durations from CUPTI")
    assert any(n.startswith("add: CUDA events") for n in r.notes)


def test_second_run_gets_a_baseline_and_a_new_folder(isolated: Path) -> None:
    from kbench.api import event_profile_plan

    first = event_profile_plan(_vector_add(), out_dir="prof", bench_runs=10)
    second = event_profile_plan(_vector_add(), out_dir="prof", version="v2", bench_runs=10)
    assert first.out_dir != second.out_dir and Path(first.out_dir, "report.md").exists()
    assert second.version == "v2" and second.sections.baseline and first.out_dir in second.sections.baseline.source
    assert "## vs Baseline" in second.report_md
    assert contract_problems(Path(second.out_dir) / "report.md") == []


def test_autotune_cache_is_reused_and_a_corrupt_entry_is_retuned(isolated: Path, caplog) -> None:
    from kbench.api import event_profile_plan
    from kbench.plan.discovery import with_version

    plan = with_version(_vector_add(), "v2")
    event_profile_plan(plan, out_dir="prof", bench_runs=5)
    entries = list(Path(".cache/kernel-autotune").rglob("*.json"))
    assert len(entries) == 1
    again = event_profile_plan(plan, out_dir="prof", bench_runs=5)
    assert tiling(again)["add"]["tuning_source"] == "cache"
    entries[0].write_text("{not json")
    with caplog.at_level(logging.WARNING):
        third = event_profile_plan(plan, out_dir="prof", bench_runs=5)
    assert tiling(third)["add"]["tuning_source"] == "tuned"
    assert any("corrupt" in m for m in caplog.messages)
    assert json.loads(entries[0].read_text())["best"] == tiling(third)["add"]["config"]


def test_every_tuning_config_passes_on_the_gpu() -> None:
    from kbench.capture.check import check_plan
    from kbench.plan.discovery import load_version

    for pkg, version, values in [
        ("vector_add", "v2", {"n": 1 << 20}),
        ("matmul", "v2", {"m": 1000, "n": 1024, "k": 520}),
        ("matmul", "torch_mm", {}),
        ("fork_join", "base", {"m": 1000, "n": 520, "k": 260, "w": 3000}),
    ]:
        plan = load_version(pkg, version).from_values(values)
        results = check_plan(plan, "cuda")
        assert results and all(r.result.passed for r in results), [r.result.line() for r in results]


def test_library_stage_has_no_triton_artifacts(isolated: Path) -> None:
    from kbench.api import event_profile_plan
    from kbench.plan.discovery import load_version

    plan = load_version("matmul", "torch_mm").from_values({"m": 2048, "n": 2048, "k": 2048})
    r = event_profile_plan(plan, out_dir="prof", bench_runs=10, cuda_graph=True)
    assert "CUDA-graph replay" in r.timing_method
    assert [p.name for p in (Path(r.out_dir) / "compiled" / "mm").iterdir()] == ["README.txt"]
    assert r.stage("mm").bottleneck in {"Compute", "Memory", "Latency"}
    assert contract_problems(Path(r.out_dir) / "report.md") == []


def test_active_device_is_known_or_explicitly_unknown() -> None:
    from kbench.capture.gpu import active_device

    dev = active_device()
    assert dev.name
    assert (dev.key is None) == (dev.spec is None)


def test_unknown_device_gets_na_roofline_and_measured_classification(isolated: Path, monkeypatch) -> None:
    from kbench.api import event_profile_plan

    table = json.loads((Path(__file__).parents[1] / "conf" / "devices.json").read_text())
    table["devices"] = {"Other": table["devices"]["L40S"] | {"nvml_names": ["No Such GPU"]}}
    path = isolated / "devices.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv("KBENCH_DEVICES", str(path))
    r = event_profile_plan(_vector_add(), out_dir="prof", bench_runs=5)
    s = r.stage("add")
    assert r.device_key is None and s.bound_us is None and s.efficiency_pct is None
    assert s.bottleneck == "Memory" and "measured at run time" in r.figures.ceilings_source
    assert contract_problems(Path(r.out_dir) / "report.md") == []


def test_crashing_kernel_marks_the_folder_failed(isolated: Path) -> None:
    env_path = Path(__file__).parent / "data" / "user_kernels"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kbench.kernel",
            "broken",
            "--prof_type=event",
            "--out",
            "prof",
            "--kernel-path",
            str(env_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 5, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("kbench: error:")]
    assert len(errors) == 1 and "stage boom failed" in errors[0] and out.stderr.endswith(errors[0] + "\n")
    (run,) = list(Path("prof/event/broken").glob("*/*"))
    assert json.loads((run / "params.json").read_text())["status"] == "failed"
    assert (run / "FAILED.txt").exists() and not (run / "report.md").exists()


def test_cli_event_run_prints_the_report(isolated: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kbench.kernel",
            "vector_add",
            "v2",
            "--n=1048576",
            "--prof_type=event",
            "--bench-runs=10",
            "--out",
            "prof",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# Profile: vector_add v2")
    assert "wrote prof/event/vector_add/n1048576_float32/" in out.stderr


def test_annotation_mode_reads_counters_for_each_stage(isolated: Path) -> None:
    from kbench.api import annotation_profile_plan

    r = annotation_profile_plan(_vector_add(1 << 24), out_dir="prof")
    run = Path(r.out_dir)
    assert contract_problems(run / "report.md") == []
    (c,) = r.sections.counters.stages  # type: ignore[union-attr]
    assert c.kernels == ["add_kernel"] and c.dram_pct is not None and c.dram_pct > 50
    # 14 for the roofline, 7 for the diagnosis, 2 for time by source line (KBENCH_ANNOTATION_LINES=0 leaves them out)
    assert c.replay_passes is not None and c.replay_passes <= 23
    assert r.stage("add").bottleneck == "Memory" and r.sections.conformance.rows[0]["verdict"] == "as declared"  # type: ignore[union-attr]
    assert (run / "profile.ncu-rep").exists() and (run / "compiled" / "add").is_dir()
    params = json.loads((run / "params.json").read_text())
    assert params["status"] == "ok" and "--clock-control none" in params["ncu_command"]


def test_ncu_mode_writes_the_deep_dive(isolated: Path) -> None:
    from kbench.api import ncu_profile_plan
    from kbench.plan.discovery import load_version

    plan = load_version("matmul", "v2").from_values({"m": 2048, "n": 2048, "k": 2048})
    r = ncu_profile_plan(plan, out_dir="prof")
    run = Path(r.out_dir)
    assert contract_problems(run / "report.md") == []
    assert (run / "report-verbose.md").stat().st_size > 10_000
    assert "tl.dot" in (run / "source" / "mm.md").read_text()
    assert list((run / "sass").glob("mm-*.csv")) and list((run / "compiled" / "mm").glob("*.ptx"))
    (c,) = r.sections.counters.stages  # type: ignore[union-attr]
    assert c.tensor_flops == 2 * 2048**3 and r.stage("mm").bottleneck in {"Compute", "Latency"}


def test_ncu_failures_are_one_line(isolated: Path) -> None:
    env_path = Path(__file__).parent / "data" / "user_kernels"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kbench.kernel",
            "broken",
            "--prof_type=annotation",
            "--out",
            "prof",
            "--kernel-path",
            str(env_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [line for line in out.stderr.splitlines() if line.startswith("kbench: error:")]
    assert out.returncode != 0 and len(errors) == 1 and "stage boom failed" in errors[0], out.stderr
    (run,) = list(Path("prof/annotation/broken").glob("*/*"))
    assert json.loads((run / "params.json").read_text())["status"] == "failed"


def _fork_join():
    from kbench.plan.discovery import load_version

    return load_version("fork_join").from_values({"m": 2048, "n": 2048, "k": 2048, "w": 32768})


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_nsys_mode_times_a_concurrent_plan(isolated: Path, backend: str) -> None:
    from kbench.api import nsys_profile_plan

    r = nsys_profile_plan(_fork_join(), out_dir="prof", bench_runs=10, backend=backend)
    run = Path(r.out_dir)
    assert contract_problems(run / "report.md") == [] and "## Timeline" in r.report_md
    assert isinstance(r.sections, ModeSections) and r.sections.timeline is not None
    t = r.sections.timeline.analysis
    assert t is not None and [s.stage for s in t.stages] == ["mm", "rowsum", "combine"]
    assert all(s.occurrences == 10 and s.alone is not None and s.alone.n == 10 for s in t.stages)
    assert t.order is not None and t.order.dependency_checks == 20 and t.order.dependency_violations == 0
    assert t.overlap is not None and t.overlap.ideal_us < t.overlap.sequential_us
    assert t.stage("mm").streams != t.stage("rowsum").streams
    for name in ("trace.json", "timeline.csv", "occurrences.csv", "stages.csv", "windows.csv", "gaps.csv"):
        assert (run / name).stat().st_size > 0, name
    params = json.loads((run / "params.json").read_text())
    assert params["status"] == "ok"
    if backend == "torch":
        assert params["capture_backend"] == "torch" and (run / "pytorch_trace.json").exists()
        assert "PyTorch profiler" in r.sections.timeline.capture and "asked for" in r.sections.timeline.capture


def test_nsys_mode_falls_back_when_nsys_fails(isolated: Path, monkeypatch) -> None:
    from kbench.api import nsys_profile_plan

    fake = isolated / "nsys"
    fake.write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'NVIDIA Nsight Systems version 2025.3.1.90' && exit 0\n"
        "echo 'Unable to retrieve the importer version: skipping importation of the QDSTRM file'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("KBENCH_NSYS", str(fake))
    r = nsys_profile_plan(_vector_add(), out_dir="prof", bench_runs=5)
    assert isinstance(r.sections, ModeSections) and r.sections.timeline is not None
    assert "nsys was not used: nsys wrote no report" in r.sections.timeline.capture
    assert contract_problems(Path(r.out_dir) / "report.md") == []
    assert json.loads((Path(r.out_dir) / "params.json").read_text())["capture_backend"] == "torch"


def test_event_mode_on_a_concurrent_plan_points_to_nsys(isolated: Path) -> None:
    from kbench.api import event_profile_plan

    r = event_profile_plan(_fork_join(), out_dir="prof", bench_runs=10)
    assert "--prof_type=nsys" in r.report_md and r.plan_timing is not None
    assert contract_problems(Path(r.out_dir) / "report.md") == []


def test_clocks_are_read_and_sampled_but_never_changed() -> None:
    from kbench.capture import clocks, tools

    with clocks.control() as ctl:
        assert isinstance(ctl, clocks.NvmlControl)
        r = ctl.read()
        assert r.sm_mhz is not None and r.sm_mhz > 0 and r.reasons is not None
        assert (ctl.base_sm_mhz() or 0) > 0 and (ctl.max_mem_mhz() or 0) > 0
        with clocks.Monitor(ctl, interval_s=0.01) as m:
            import time

            time.sleep(0.2)
        assert len(m.samples) >= 10 and all(s.sm_mhz for s in m.samples)
    smi = tools.nvidia_smi()
    assert smi is not None
    r = clocks.SmiControl(smi, ctl.index).read()  # the fallback's queries parse on the real nvidia-smi
    assert r.sm_mhz is not None and r.reasons is not None


def test_an_unlocked_profile_reports_the_sampled_clocks(isolated: Path) -> None:
    from kbench.api import event_profile_plan

    r = event_profile_plan(_vector_add(), out_dir="prof", bench_runs=50, lock_clocks=False)
    s = r.clock_summary
    assert s is not None and s.samples >= 3 and s.sm_min_mhz is not None and s.sm_min_mhz > 0
    assert r.clocks.startswith("not locked (--no-lock-clocks") and f"SM {s.sm_min_mhz}-{s.sm_max_mhz} MHz" in r.clocks
    params = json.loads((Path(r.out_dir) / "params.json").read_text())
    assert params["clock_samples"]["samples"] == s.samples


def test_cupti_repetitions_are_cut_right_after_a_settling_rest() -> None:
    import torch

    from kbench.capture.cupti import Repetitions, time_cupti
    from kbench.capture.timing import L2Flush

    x = torch.ones(1 << 20, device="cuda")
    got = time_cupti(lambda: x.mul_(1.0), 5, L2Flush(8 << 20), rest_us=20.0, settle_us=20_000.0)
    assert isinstance(got, Repetitions), got
    assert len(got.us) == 5 and all(0 < u < 1_000 for u in got.us)  # the 20 ms settle is not counted in a stage


def test_kineto_and_torch_profiler_record_the_same_gpu_work() -> None:
    # the same body traced both ways: the same pieces of GPU work, in the same order, durations within 10% (two runs)
    import statistics

    import torch

    from kbench.capture import cupti

    x = torch.randn(1 << 22, device="cuda")

    def body() -> None:
        for _ in range(20):
            x.zero_()
            cupti.probe()
            x.add_(1.0)

    ours = cupti._kineto(body, cupti.kineto_session())
    theirs = cupti._chrome(body)
    assert len(ours) == len(theirs) == 20 * 4
    for slot in range(4):
        a = statistics.median(d for _, d in ours[slot::4])
        b = statistics.median(d for _, d in theirs[slot::4])
        assert abs(a / b - 1.0) < 0.1, (slot, a, b)


def test_the_kernels_census_names_each_stages_kernels_and_their_ops(isolated: Path) -> None:
    # a census of a stage with a Triton kernel and a framework conversion: the kernels, their real launch facts, the
    # op that launched each, and the phase it cost; then the report's Kernels table and the undeclared item
    import torch

    from kbench.api import event_profile_plan
    from kbench.capture.census import census
    from kbench.plan.discovery import load_version
    from tests.conftest import DATA

    x = torch.randn(1 << 20, device="cuda")
    record = census(lambda: x.to(torch.bfloat16).float().sum())
    assert isinstance(record, dict), record
    assert record["runs"] == 3 and len(record["host_us"]) == 3 and record["unplaced"] == 0
    assert all(i["launches"] == [i["launches"][0]] * 3 for i in record["items"])
    assert any(i["op"] and i["op"].startswith("aten::to") for i in record["items"])
    assert "cudaDeviceSynchronize" not in record["api"]  # the sync between runs is outside the runs

    plan = load_version("convert", "torch_cast", [str(DATA / "validation")]).from_values({"n": 1 << 22})
    r = event_profile_plan(plan, out_dir="prof", bench_runs=20)
    run = Path(r.out_dir)
    kernels = json.loads((run / "kernels.json").read_text())
    items = kernels["stages"]["axpb"]["items"]
    axpb = next(i for i in items if i["name"] == "axpb_kernel")
    assert axpb["op"] == "Triton launch" and axpb["grid"] == tiling(r)["axpb"]["grid"] + [1, 1]
    assert any(i["op"] == "aten::to > aten::copy_" for i in items)
    params = json.loads((run / "params.json").read_text())
    assert 0 <= params["phases_s"]["kernel census"] < 5.0  # what the census cost (0.00 s: under 5 ms)
    text = r.report_md
    assert "| Stage | Kernel | Launches |" in text and "| no | aten::to > aten::copy_ |" in text
    assert "axpb.undeclared_kernel_pct" in text and contract_problems(run / "report.md") == []
    assert "the facts above describe axpb_kernel" in text


@pytest.mark.parametrize(
    ("kernel", "version", "values"),
    [("vector_add", None, {"n": 1 << 25}), ("matmul", "v2", {"m": 4096, "n": 4096, "k": 4096})],
)
def test_sampled_dram_agrees_with_ncu_replaying_the_same_stage(
    isolated: Path, kernel: str, version: str | None, values: dict[str, int]
) -> None:
    """A copy-like add and a GEMM: event mode's sampled DRAM% within 5 points of annotation mode's (ncu, replayed,
    caches flushed by both); the GEMM's sampled tensor pipe busy."""
    from kbench.api import annotation_profile_plan, event_profile_plan
    from kbench.capture.sampling import Sampler, start
    from kbench.plan.discovery import load_version

    sampler = start()
    if not isinstance(sampler, Sampler):
        pytest.skip(f"no PM sampling here: {sampler}")
    sampler.close()
    plan = load_version(kernel, version).from_values(values)
    sampled = event_profile_plan(plan, out_dir="prof", bench_runs=20)
    replayed = annotation_profile_plan(plan, out_dir="prof")
    for s in sampled.figures.stages:
        c = replayed.stage(s.name)
        assert s.dram_pct is not None and c.dram_pct is not None
        assert abs(s.dram_pct - c.dram_pct) <= 5.0, (s.name, s.dram_pct, c.dram_pct)
    if kernel == "matmul":
        (s,) = sampled.figures.stages
        assert s.tc_pct is not None and s.tc_pct > 30
    assert contract_problems(Path(sampled.out_dir) / "report.md") == []


def test_a_gluon_plan_runs_like_a_triton_one(isolated: Path) -> None:
    """vector_add gluon on the GPU: the check passes, event mode keeps its compiled files and launch record (on the
    H100 by hand, 2026-11-27: PASS, 25 registers, docs/examples/issue44-h100)."""
    from kbench.api import event_profile_plan
    from kbench.plan.discovery import load_version

    r = event_profile_plan(
        load_version("vector_add", "gluon").from_values({"n": 1 << 24}), out_dir="prof", bench_runs=10
    )
    run = Path(r.out_dir)
    assert contract_problems(run / "report.md") == []
    assert json.loads((run / "params.json").read_text())["correctness"].startswith("PASS")
    assert {p.suffix for p in (run / "compiled" / "add").iterdir()} >= {".ttgir", ".ptx", ".cubin"}
    tiling = json.loads((run / "tiling" / "add.json").read_text())
    assert tiling["kernel"] == "gluon_add_kernel" and tiling["num_warps"] == 4


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mla_decode_v8s_warp_specialized_kernel_matches_the_reference(dtype: str) -> None:
    """v8's three partitions (two warpgroups exchanging partial scores through mbarriers, a copying warp) at the real
    widths on a fused grid, t ending inside a tile: a float64 reference within the plan's tolerance."""
    from kbench.kernel.mla_decode.v8 import MlaDecodeSplitQ

    plan = MlaDecodeSplitQ(b=100, s=4, t=1000, h=16, dtype=dtype)
    (stage,) = plan.stages()
    assert stage.kernels == ["mla_v8_kernel"]
    ws = plan.setup("cuda", 0)
    stage.build(ws, stage.tuning[0]).fn()
    ref = plan.reference(ws).float()
    assert float((plan.output(ws).float() - ref).abs().max() / ref.abs().max()) < plan.tolerance[dtype]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mla_decode_v7s_gluon_kernel_matches_the_reference(dtype: str) -> None:
    """v7's Gluon kernel at the real widths (d=512, p=64) on a fused grid (100 CTAs): a float64 reference within the
    plan's tolerance, with t ending inside a tile, in both orders of the loop."""
    from kbench.kernel.mla_decode.v7 import MlaDecodeGluon

    plan = MlaDecodeGluon(b=100, s=4, t=1000, h=16, dtype=dtype)
    assert plan.fused() and plan.gluon()
    (stage,) = plan.stages()
    assert stage.kernels == ["mla_v7_kernel"]
    ws = plan.setup("cuda", 0)
    ref = plan.reference(ws).float()
    for pv_first in (True, False):
        ws.out.zero_()
        stage.build(ws, {**stage.tuning[0], "PV_FIRST": pv_first}).fn()
        err = float((plan.output(ws).float() - ref).abs().max() / ref.abs().max())
        assert err < plan.tolerance[dtype], (pv_first, err)


def _every_cut_matches_the_reference(version: str, point: dict[str, int], dtype: str) -> None:
    """Each tuned cut of the batch and each of the combine's configurations, launched twice (the in-kernel merges'
    counters must be back at zero for the next launch), within the plan's tolerance of the float64 reference."""
    from kbench.plan.discovery import load_version

    cls = load_version("mla_decode", version)
    assert "MlaDecodeServe" in [k.__name__ for k in cls.__mro__]  # by name: discovery may have reloaded v9
    plan = cls(**point, dtype=dtype)
    stages = plan.stages()
    ws = plan.setup("cuda", 0)
    ref = plan.reference(ws).float()
    merges = stages[1].tuning if len(stages) > 1 else [{}]
    for cfg, merge in itertools.product(stages[0].tuning, merges):
        for _ in range(2):
            ws.out.zero_()
            stages[0].build(ws, cfg).fn()
            if len(stages) > 1:
                stages[1].build(ws, merge).fn()
            err = float((plan.output(ws).float() - ref).abs().max() / ref.abs().max())
            assert err < plan.tolerance[dtype], (cfg, merge, err)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize(
    "point",
    [
        {"b": 3, "s": 1, "t": 2000, "h": 128},  # split contiguous sequences and a combine
        {"b": 5, "s": 3, "t": 1000, "h": 16, "t_min": 65, "page": 64},  # ragged, paged, a token's chunk unseen
        {"b": 100, "s": 4, "t": 1000, "h": 16},  # one chunk per sequence: written directly, no combine
        {"b": 24, "s": 2, "t": 1500, "h": 128, "t_min": 600, "page": 64},  # two chunks at most: v10 merges in-kernel
        {"b": 32, "s": 4, "t": 1000, "h": 16},  # four, three, two chunks (the cuts tuned): v15 merges in-kernel
        {"b": 2, "s": 16, "t": 4096, "h": 16},  # more chunks a sequence than v16's combine loads at once
    ],
)
@pytest.mark.parametrize("version", ["v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17"])
def test_mla_decode_v9s_work_items_match_the_reference(dtype: str, point: dict[str, int], version: str) -> None:
    """v9-v16 at the real widths: each tuned cut of the batch (split or not, ragged, paged) and, for v11-v13, each
    of the seesaw's variants, within the plan's tolerance of a float64 reference taken sequence by sequence; v10's
    and v12's in-kernel merge run twice per cut (the arrival counters must be back at zero for the next launch), as
    does v13's combine chained in one stage (launched as the attention kernel's programmatic dependent, partials in
    the output's type), v14's Gluon combine, v15's merge of up to four chunks in the kernel, each of v16's
    combines (every chunk of a group loaded at once) and v17's cooperative merge (its generations run on)."""
    _every_cut_matches_the_reference(version, point, dtype)


def test_mla_decode_v17s_cooperative_merge_repeats_exactly() -> None:
    """v17 at MTP (128 CTAs launched cooperatively, four chunks a row block merging it together) launched 50 times,
    the output cleared between: each is the first's to the bit (every slice merged once a launch, the generations
    running on), and the arrivals are back at zero after each."""
    import torch

    from kbench.plan.discovery import load_version

    cls: Any = load_version("mla_decode", "v17")
    plan = cls(b=32, s=4, t=4096, h=16, dtype="bfloat16")
    (stage,) = plan.stages()
    cut = plan.cuts()[0]
    assert plan.merged(cut) and len(cut.items) * plan.row_blocks() <= 132
    ws = plan.setup("cuda", 0)
    ref = plan.reference(ws).float()
    launch = stage.build(ws, next(c for c in stage.tuning if c["CHUNK"] == cut.bound))
    outs = []
    for _ in range(50):
        ws.out.zero_()
        launch.fn()
        outs.append(plan.output(ws).clone())
    torch.cuda.synchronize()
    err = float((outs[0].float() - ref).abs().max() / ref.abs().max())
    assert err < plan.tolerance["bfloat16"], err
    assert all(torch.equal(o, outs[0]) for o in outs[1:])
    assert int(ws.coop[..., 0].abs().sum()) == 0  # each row block's arrivals back at zero for the next launch
    assert int(ws.coop[..., 1].min()) == 50  # each row block merged once a launch


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize(
    "point",
    [
        {"b": 5, "s": 1, "t": 1000, "h": 16, "t_min": 65, "page": 64},  # ragged, paged, split: v16's combine
        {"b": 5, "s": 3, "t": 1000, "h": 4, "t_min": 65, "page": 64},  # 12 rows: a block's last 4 read past them
        {"b": 4, "s": 2, "t": 3000, "h": 8, "t_min": 100, "page": 64},  # two tokens: a row sees its prefix only
        {"b": 66, "s": 1, "t": 2000, "h": 16},  # two chunks a sequence: merged in the kernel
        {"b": 100, "s": 1, "t": 1000, "h": 16},  # one chunk a sequence: written directly
    ],
)
def test_mla_decode_v18s_transposed_product_matches_the_reference(dtype: str, point: dict[str, int]) -> None:
    """v18 where a sequence has 16 query rows or fewer (S^T = K Q^T, O^T += V^T P^T: the cache rows as the wgmma's
    M), at every tuned cut, split or not, ragged and paged, merged in the kernel or by the combine."""
    from kbench.plan.discovery import load_version

    cls: Any = load_version("mla_decode", "v18")
    assert cls(**point, dtype=dtype).few_rows()
    _every_cut_matches_the_reference("v18", point, dtype)
