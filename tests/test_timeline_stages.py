"""The per-stage timeline analyses and nsys-mode reports on kbench's own H100 captures of the concurrent plan
(tests/data/kbench_h100: fork_join base under Nsight Systems, 100 iterations, and under the PyTorch profiler,
20 iterations), and on the shared captures of another program (tests/data/timeline_h100)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbench import pipeline
from kbench.analysis import timeline as tl
from kbench.analysis import timeline_stages as ts
from kbench.analysis.figures import from_timeline
from kbench.errors import KbenchError
from kbench.plan.discovery import load_version
from kbench.report.mode_sections import ModeSections, Timeline
from kbench.report.models import ProfileResult, read_result
from kbench.report.trace import chrome_trace
from tests.conftest import DATA, Ran, contract_problems

KBENCH = DATA / "kbench_h100"
NSYS, TORCH = KBENCH / "nsys_fork_join.sqlite", KBENCH / "torch_fork_join.json"
SPECS = [ts.StageSpec("mm", 1), ts.StageSpec("rowsum", 2), ts.StageSpec("combine", 0, ("mm", "rowsum"))]


@pytest.fixture(scope="module")
def both() -> dict[str, ts.TimelineAnalysis]:
    return {p.suffix: ts.analyze(tl.load(p), ts.backend_of(p.suffix), p.name, SPECS) for p in (NSYS, TORCH)}


def test_every_iteration_and_every_stage_alone_is_found(both: dict[str, ts.TimelineAnalysis]) -> None:
    for suffix, runs in ((".sqlite", 100), (".json", 20)):
        a = both[suffix]
        assert a.grouping == "NVTX ranges kbench.<stage> inside kbench:iteration"
        assert [s.stage for s in a.stages] == ["mm", "rowsum", "combine"] and len(a.windows) == runs
        for s in a.stages:
            assert s.occurrences == runs and s.alone is not None and s.alone.n == runs
            assert len(s.streams) == 1 and s.kernels == [f"{s.stage}_kernel"]
        assert len({a.stage(n).streams[0] for n in ("mm", "rowsum", "combine")}) == 3  # three streams
        order = a.order
        assert order is not None and order.api == [("mm, rowsum, combine", runs)]
        assert order.dependency_checks == 2 * runs and order.dependency_violations == 0


def test_overlap_against_the_ideal_agrees_across_backends(both: dict[str, ts.TimelineAnalysis]) -> None:
    nsys, torch = both[".sqlite"].overlap, both[".json"].overlap
    assert nsys is not None and torch is not None
    for o in (nsys, torch):
        assert o.streams == 3 and o.ideal_us < o.together_us < o.sequential_us
        assert o.achieved_pct is not None and 0 < o.achieved_pct < 100
        alone = {s.stage: s.alone.median_us for s in both[".sqlite"].stages if s.alone}
        assert ts.critical_path_us(SPECS, alone) == pytest.approx(nsys.ideal_us)
    assert round(nsys.achieved_pct or 0, 1) == 12.9 and round(torch.achieved_pct or 0, 1) == 13.1
    # the same plan captured by two backends: spans within 1%, overlap within 2 points
    assert torch.together_us == pytest.approx(nsys.together_us, rel=0.01)
    assert abs((torch.achieved_pct or 0) - (nsys.achieved_pct or 0)) < 2.0
    for name in ("mm", "rowsum", "combine"):
        a, b = both[".sqlite"].stage(name), both[".json"].stage(name)
        spread = (a.gpu.p90_us - a.gpu.p10_us) + (b.gpu.p90_us - b.gpu.p10_us)  # iteration-to-iteration variation
        assert abs(b.gpu.median_us - a.gpu.median_us) <= spread, name
        assert abs(b.overlapped_pct - a.overlapped_pct) < 2.0, name


def test_busy_idle_and_gaps_per_iteration(both: dict[str, ts.TimelineAnalysis]) -> None:
    a = both[".sqlite"]
    for w in a.windows:
        assert w.busy_us + w.idle_us == pytest.approx(w.window_us)
        assert 0 <= w.concurrent_us < w.busy_us and w.span_us <= w.window_us
    assert a.median("concurrent_us") > 0  # mm and rowsum overlap in most iterations (not in every one)
    assert a.gaps and [g.gap_us for g in a.gaps] == sorted((g.gap_us for g in a.gaps), reverse=True)
    assert a.gaps[0].after == "(window start: no GPU work yet)" and a.gaps[0].at_us == 0.0
    assert round(a.idle_pct, 1) == 18.4 and round(a.span_us.median_us, 2) == 407.33


def test_launch_latency_is_per_stage_and_includes_queueing(both: dict[str, ts.TimelineAnalysis]) -> None:
    a = both[".sqlite"]
    mm, combine = a.stage("mm"), a.stage("combine")
    assert mm.launch_latency_us is not None and combine.launch_latency_us is not None
    assert 0 < mm.launch_latency_us < 50  # the first launch on an idle GPU
    assert combine.launch_latency_us > mm.launch_latency_us  # combine waits for mm and rowsum


def test_critical_path_follows_streams_and_dependencies() -> None:
    alone = {"mm": 200.0, "rowsum": 150.0, "combine": 20.0}
    assert ts.critical_path_us(SPECS, alone) == 220.0
    serial = [ts.StageSpec("mm"), ts.StageSpec("rowsum"), ts.StageSpec("combine", 0, ("mm", "rowsum"))]
    assert ts.critical_path_us(serial, alone) == 370.0


def test_a_capture_without_the_plans_ranges_is_refused() -> None:
    with pytest.raises(KbenchError, match=r"no GPU work was launched inside NVTX range\(s\) kbench.combine:"):
        ts.analyze(tl.load(DATA / "timeline_h100" / "timeline.sqlite"), "Nsight Systems", "timeline.sqlite", SPECS)


def test_no_model_and_a_busy_gpu_is_not_guessed() -> None:
    a = ts.analyze(tl.load(DATA / "timeline_h100" / "kineto_trace.json"), "PyTorch profiler (CUPTI)", "k.json")
    assert a.grouping.startswith("kernel names") and a.idle_pct < 50
    with pytest.raises(KbenchError, match="a timeline alone cannot tell memory- from compute-bound"):
        from_timeline(a, None, {}, roofline_known=False, device_name="NVIDIA H100 80GB HBM3")


def test_a_busy_timeline_without_a_plan_still_writes_what_it_decided(isolated: Path) -> None:
    """No FLOP/byte model and a busy GPU: the timeline's tables, trace and timeline.md (what was decided, what
    was not) are written, no report.md (its Bottleneck line must name a class), and the error names the folder."""
    capture = DATA / "timeline_h100" / "kineto_trace.json"
    with pytest.raises(KbenchError, match=r"busy 95.5% .* wrote its tables, trace.json and timeline.md to ") as e:
        pipeline.analyze(capture, None, Path("prof"), None)
    (run,) = Path("prof").glob("nsys/*/*/*")
    assert str(run) in str(e.value)
    assert {"timeline.md", "trace.json", "timeline.csv", "stages.csv", "gaps.csv", capture.name} <= {
        p.name for p in run.iterdir()
    }
    assert not (run / "report.md").exists()
    params = json.loads((run / "params.json").read_text())
    assert params["status"] == "undecided" and "cannot tell" in params["undecided"]
    text = (run / "timeline.md").read_text()
    assert "Decided: the GPU was busy 95.5%" in text and "Not decided: memory- or compute-bound" in text
    assert "| add_kernel | 7, 21 | add_kernel | 4 |" in text  # the stages' spans, as in a report's Timeline
    assert json.loads((run / "trace.json").read_text())["traceEvents"]


@pytest.mark.parametrize("capture", [NSYS, TORCH])
def test_reports_of_kbench_captures_pass_the_contract(capture: Path, isolated: Path) -> None:
    plan = load_version("fork_join").from_values({})
    r = pipeline.analyze(capture, None, Path("prof"), plan)
    run = Path(r.out_dir)
    assert contract_problems(run / "report.md") == []
    assert [s.name for s in r.stages] == ["mm", "rowsum", "combine"]
    assert [s.bottleneck for s in r.stages] == ["Compute", "Memory", "Memory"]
    assert r.figures.opportunities[0].metric == "plan.overlap_achieved"
    assert "### Launch order" in r.report_md and "respected in" in r.report_md
    for name in ("timeline.csv", "occurrences.csv", "stages.csv", "windows.csv", "gaps.csv", capture.name):
        assert (run / name).stat().st_size > 0
    saved = json.loads((run / "result.json").read_text())
    timeline_saved = saved["sections"]["timeline"]
    timeline = timeline_saved["analysis"]
    assert "occurrences" not in timeline and len(timeline["windows"]) in (20, 100)
    # the timeline section is a ModeSections' field: written as such and read back as such, nothing lost (but
    # the occurrences, which result.json leaves out)
    back = read_result(run)
    assert isinstance(back, ProfileResult) and isinstance(back.sections, ModeSections)
    assert back.model_dump() == r.model_dump() and back.sections.timeline == Timeline.model_validate(timeline_saved)
    assert json.loads((run / "params.json").read_text())["status"] == "ok"


def test_chrome_trace_has_every_row_and_a_flow_per_launch(tmp_path: Path) -> None:
    frame = tl.load(NSYS)
    trace = chrome_trace(frame)
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    flows = [e for e in trace["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(complete) == len(frame) and min(e["ts"] for e in complete) == 0.0
    kernels = frame[frame["kind"] == "kernel"]
    assert len(flows) == 2 * len(kernels) + 2 * int((frame["kind"].isin(["memcpy", "memset"])).sum())
    gpu_tracks = {(e["pid"], e["tid"]) for e in complete if e["cat"] == "kernel"}
    assert len(gpu_tracks) == 3  # the two side streams, and the caller's (combine, the L2 flush, the alone runs)
    own = tmp_path / "trace.json"
    own.write_text(json.dumps(trace))
    with pytest.raises(KbenchError, match="is kbench's own trace for viewing; analyse the raw capture"):
        tl.load(own)


def test_analyze_command_on_timelines(cli, isolated: Path) -> None:
    def run_analyze(*args: str, cwd: Path) -> Ran:
        ran: Ran = cli("analyze", *args, "--out", "prof")
        return ran

    p = run_analyze(str(DATA / "timeline_h100" / "timeline.sqlite"), cwd=isolated)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("# Profile: timeline offline") and "Bottleneck: Latency-bound" in p.stdout
    (report,) = isolated.glob("prof/nsys/timeline/timeline/*/report.md")
    assert contract_problems(report) == []
    p = run_analyze(str(TORCH), "--plan", "fork_join", cwd=isolated)
    assert p.returncode == 0, p.stderr
    assert "Captured by PyTorch profiler (CUPTI) (`torch_fork_join.json`)" in p.stdout
    bad = [
        ([str(DATA / "timeline_h100" / "kineto_trace.json")], 1, "timeline.md to prof/nsys/kineto_trace"),
        ([str(NSYS), "--mode", "ncu"], 2, "--mode=ncu reads Nsight Compute reports (.ncu-rep); a .sqlite capture"),
        ([str(NSYS), "--plan", "vector_add"], 1, "no GPU work was launched inside NVTX range(s) kbench.add"),
        ([str(DATA / "timeline_h100" / "README.md")], 2, "kbench analyze reads Nsight Compute reports"),
    ]
    for args, code, fragment in bad:
        p = run_analyze(*args, cwd=isolated)
        errors = [line for line in p.stderr.splitlines() if line.startswith("kbench: error:")]
        assert p.returncode == code and len(errors) == 1 and fragment in errors[0], (args, p.stderr)
