"""The pictures kbench draws, read as the data they are drawn from (no pixels): the roofline chart's datasheet and
practical roofs, the access pictures' axes, colour bar and title, and nsys mode's timeline picture, all from real
H100 captures."""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kbench import pipeline
from kbench.analysis import timeline as tl
from kbench.analysis import timeline_stages as ts
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.figures import Facts
from kbench.errors import KbenchError
from kbench.plan.discovery import load_version
from kbench.report import chart, timeline_chart
from tests.conftest import DATA, contract_problems

PNG = b"\x89PNG\r\n\x1a\n"
MATMUL = DATA / "kbench_h100" / "annotation_matmul_base.ncu-rep"
NSYS_FORK_JOIN = DATA / "kbench_h100" / "nsys_fork_join.sqlite"
TORCH_FORK_JOIN = Path(__file__).parents[1] / "docs/examples/nsys-fork_join-base-nsys-failed/pytorch_trace.json"
TIMELINE = DATA / "timeline_h100"


# --- the roofline chart ---------------------------------------------------------------------------------------------


def _matmul(tmp_path: Path) -> Any:
    return pipeline.analyze(MATMUL, "annotation", tmp_path, load_version("matmul").from_values({}))


def test_the_roofline_chart_draws_the_practical_roof_the_gains_use_beside_the_datasheet_roof(tmp_path: Path) -> None:
    result = _matmul(tmp_path)
    device = resolve(load_devices(), result.device)
    assert device.spec is not None
    datasheet = device.ceilings()
    practical = Facts.of(device, {}).practical  # the roofs Top 3's gains are measured against
    d = chart.roofline_drawing(result.figures, datasheet, practical, "t")
    assert d is not None
    roofs = {(r.precision, r.kind): r for r in d.roofs}
    assert set(roofs) == {("bf16", chart.DATASHEET), ("bf16", chart.PRACTICAL)}
    for kind, want in ((chart.DATASHEET, datasheet["bf16"]), (chart.PRACTICAL, practical["bf16"])):
        r = roofs[("bf16", kind)]
        assert (r.tflops, r.gbps) == (want.tflops, want.gbps)
        assert r.xs[1] == pytest.approx(want.ridge) and r.ys[1] == pytest.approx(want.tflops)  # the ridge's corner
        assert r.ys[0] == pytest.approx(r.xs[0] * want.gbps / 1e3)  # the slope: bandwidth x intensity
        assert r.label.startswith(f"bf16 {kind}") and f"{want.tflops:g} TFLOP/s" in r.label
        assert f"{want.gbps:g} GB/s" in r.label and f"ridge {want.ridge:.1f} FLOP/B" in r.label
    assert roofs[("bf16", chart.PRACTICAL)].tflops < roofs[("bf16", chart.DATASHEET)].tflops
    assert "measured" in roofs[("bf16", chart.PRACTICAL)].label
    (point,) = d.points
    (stage,) = result.figures.stages
    assert (point.intensity, point.tflops) == (stage.intensity, stage.tflops)
    assert f"{stage.efficiency_pct:.0f}% of datasheet" in point.label and "% of practical" in point.label
    ridges = [r.ridge for r in d.roofs]
    assert d.xlim[0] < min(ridges) and d.xlim[1] > max(stage.intensity or 0, *ridges)


@pytest.mark.slow
def test_a_profile_draws_both_roofs_into_roofline_png(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[chart.RooflineDrawing] = []
    draw = chart.draw_roofline

    def spy(d: chart.RooflineDrawing, path: Path) -> None:
        drawn.append(d)
        draw(d, path)

    monkeypatch.setattr(chart, "draw_roofline", spy)
    result = _matmul(tmp_path)
    assert (Path(result.out_dir) / chart.FILE).read_bytes()[:8] == PNG
    (d,) = drawn
    assert [r.kind for r in d.roofs] == [chart.DATASHEET, chart.PRACTICAL]


def test_a_device_without_measured_ceilings_draws_one_roof_and_says_it_is_also_the_practical_one(
    tmp_path: Path,
) -> None:
    result = _matmul(tmp_path)
    spec = resolve(load_devices(), result.device).spec
    assert spec is not None
    bare = spec.model_copy(update={"measured": {}})
    d = chart.roofline_drawing(result.figures, bare.ceilings("H100_SXM"), bare.practical(), "t")
    assert d is not None
    (roof,) = d.roofs
    assert roof.kind == chart.DATASHEET and "also the practical one" in roof.label


# --- the access pictures ------------------------------------------------------------------------------------------


def _transpose() -> tuple[Any, dict[str, Any]]:
    os.environ["TRITON_INTERPRET"] = "1"
    from kbench.capture.check import check_plan, cpu_values

    cls = load_version("transpose", "naive", [str(DATA / "validation")])
    plan = cls.from_values(cpu_values(cls, {})[0])
    (first,) = check_plan(plan, "cpu", maps=True)
    return plan, {"first": first, **{t.name: t for t in first.touched}}


def _labels(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def test_an_access_picture_has_axis_labels_a_colour_bar_naming_programs_and_a_title_naming_the_point() -> None:
    plan, traced = _transpose()
    x = traced["x"]
    where = chart.traced_at(plan, traced["first"].stage, traced["first"].config)
    assert where.startswith("transpose naive, stage transpose at rows=70, cols=130")
    fig = chart.access_figure(x, where, programs=16)
    try:
        read, written, bar = fig.axes
        for ax in (read, written):
            assert ax.get_xlabel() == "column: index on axis 1" and ax.get_ylabel() == "row: index on axis 0"
            # the tensor's own indices: 70 rows x 130 columns, one cell each
            assert ax.images[0].get_extent() == [-0.5, 129.5, 69.5, -0.5]
        assert [read.get_title(), written.get_title()] == [
            "first program to have it read",
            "first program to have it written",
        ]
        # the check traces every program: those after the first 16 share one colour, named as such
        assert _labels(bar) == ["not touched", "0 (ran first)", *map(str, range(1, 16)), "16 and later"]
        assert bar.get_ylabel() == "program, in the order they ran"
        title = fig._suptitle.get_text()
        assert "tensor x [70, 130]" in title and where.split(" at ")[1][:20] in title and "rows 0-69 of 70" in title
        assert [t.get_text() for t in written.texts] == ["not written by the traced programs"]
    finally:
        chart.pyplot().close(fig)


@pytest.mark.slow
def test_an_access_picture_of_the_first_programs_only_names_no_later_ones_and_a_sampled_window_keeps_indices(
    tmp_path: Path,
) -> None:
    import numpy as np

    from kbench.analysis.access import Touched

    _, traced = _transpose()
    y = traced["y"]
    # the same tensor as access mode draws it: the first 16 programs only, every 4th row and column from row 8
    first16 = Touched(y.name, y.shape, np.where(y.read < 16, y.read, -1)[8::4, ::4],
                      np.where(y.written < 16, y.written, -1)[8::4, ::4], first_row=8, step=4, rows=y.rows)  # fmt: skip
    fig = chart.access_figure(first16, "w", programs=16)
    try:
        read, _, bar = fig.axes
        assert _labels(bar)[-1] == "15"
        rows, cols = first16.read.shape
        assert read.images[0].get_extent() == [-2.0, (cols - 0.5) * 4, 8 + (rows - 0.5) * 4, 6.0]
    finally:
        chart.pyplot().close(fig)
    path = chart.access_png(first16, tmp_path / "access" / "y.png", "w")
    assert path.read_bytes()[:8] == PNG


# --- the timeline picture -----------------------------------------------------------------------------------------


def _fork_join(capture: Path) -> tuple[Any, ts.TimelineAnalysis]:
    frame = tl.load(capture)
    stages = load_version("fork_join").from_values({}).checked_stages()
    specs = [ts.StageSpec(s.name, s.stream, tuple(s.after)) for s in stages]
    return frame, ts.analyze(frame, ts.backend_of(capture.suffix), capture.name, specs)


def _overlaps(a: timeline_chart.Bar, b: timeline_chart.Bar) -> bool:
    return min(a.end_us, b.end_us) > max(a.start_us, b.start_us)


@pytest.mark.parametrize("capture", [NSYS_FORK_JOIN, TORCH_FORK_JOIN], ids=["nsys", "torch"])
def test_the_timeline_picture_draws_the_median_iteration_by_stream_and_stage_with_overlap_and_idle(
    capture: Path,
) -> None:
    frame, analysis = _fork_join(capture)
    d = timeline_chart.drawing(frame, analysis, "t")
    spans = sorted(analysis.windows, key=lambda w: (w.span_us, w.index))
    w = spans[(len(spans) - 1) // 2]
    assert w.span_us == pytest.approx(statistics.median_low(x.span_us for x in analysis.windows))
    assert d.stretch.what.startswith(f"iteration {w.index} of {len(analysis.windows)}, the one of median plan span")
    assert d.length_us == pytest.approx(w.window_us)
    # one lane per stream the stages ran on, the stages' ranges above, overlap below
    streams = [f"stream {s}" for s in sorted({s for st in analysis.stages for s in st.streams})]
    assert d.lanes == (timeline_chart.CPU_LANE, *streams, timeline_chart.OVERLAP_LANE)
    assert d.stages == tuple(st.stage for st in analysis.stages)
    for st in analysis.stages:
        mine = [b for b in d.bars if b.stage == st.stage and b.lane != timeline_chart.CPU_LANE]
        assert mine and {b.lane for b in mine} == {f"stream {s}" for s in st.streams}
        assert {b.name for b in mine} == set(st.kernels)
        (rng,) = [b for b in d.bars if b.stage == st.stage and b.lane == timeline_chart.CPU_LANE]
        assert rng.name == f"kbench.{st.stage}"
    assert all(0 <= b.start_us <= b.end_us <= d.length_us for b in d.bars)
    # fork_join's mm and rowsum run at once on two streams: bars at the same x, and the overlap lane says so
    mm = next(b for b in d.bars if b.stage == "mm" and b.lane != timeline_chart.CPU_LANE)
    rowsum = next(b for b in d.bars if b.stage == "rowsum" and b.lane != timeline_chart.CPU_LANE)
    assert mm.lane != rowsum.lane and _overlaps(mm, rowsum)
    # the picture's overlap and idle time are the analysis's figures for that iteration
    assert sum(b - a for a, b in d.concurrent) == pytest.approx(w.concurrent_us)
    assert sum(b - a for a, b in d.idle) == pytest.approx(w.idle_us)


def test_nsys_analysis_writes_the_timeline_picture_and_links_it_from_the_report(tmp_path: Path) -> None:
    result = pipeline.analyze(NSYS_FORK_JOIN, None, tmp_path, load_version("fork_join").from_values({}))
    run = Path(result.out_dir)
    assert (run / timeline_chart.FILE).read_bytes()[:8] == PNG
    assert contract_problems(run / "report.md") == []
    timeline = result.report_md.split("## Timeline")[1]
    picture = next(line for line in timeline.splitlines() if line.startswith("Picture:"))
    assert picture.startswith("Picture: `timeline.png` draws iteration ") and "of 100, the one of median" in picture
    assert any(path == timeline_chart.FILE for path, _ in result.files)


def test_a_capture_without_iteration_ranges_draws_its_busiest_stretch(tmp_path: Path) -> None:
    frame = tl.load(TIMELINE / "timeline.sqlite")
    analysis = ts.analyze(frame, ts.backend_of(".sqlite"), "timeline.sqlite")
    (w,) = analysis.windows
    d = timeline_chart.drawing(frame, analysis, "t")
    assert d.stretch.what.startswith("the busiest stretch of GPU work")
    assert w.start_ns <= d.stretch.start_ns < d.stretch.end_ns <= w.start_ns + round(w.window_us * 1e3)
    assert d.length_us < w.window_us / 10  # the capture idles for seconds between its phases
    inner = [(a, b) for a, b in d.idle if a > 0 and b < d.length_us]
    assert inner and all(b - a <= w.busy_us for a, b in inner)  # no idle stretch longer than all the GPU work
    assert {"stream 13", "stream 17"} <= set(d.lanes)  # the two-stream phase


def test_an_undecided_timeline_gets_its_picture_and_timeline_md_links_it(tmp_path: Path) -> None:
    with pytest.raises(KbenchError, match=r"timeline\.md"):
        pipeline.analyze(TIMELINE / "kineto_trace.json", None, tmp_path, None)
    run = next(tmp_path.rglob("timeline.md")).parent
    assert (run / timeline_chart.FILE).read_bytes()[:8] == PNG
    assert "Picture: `timeline.png` draws the whole analysed window" in (run / "timeline.md").read_text()


def test_short_names_keep_a_cpp_kernel_s_function_name() -> None:
    frame = tl.load(TIMELINE / "kineto_trace.json")
    names = {timeline_chart.short(str(n)) for n in frame[frame["kind"] == "kernel"]["name"]}
    assert {"add_kernel", "reduce_kernel", "vectorized_elementwise_kernel"} <= names
    assert "distribution_elementwise_grid_stride_ke…" in names and all(len(n) <= 40 for n in names)


# the review's traces (issue 50): 12,000 streams drew a 1200 x 540,250 px picture in 333 s; 40,000 kernels on 50
# streams spent 162 s naming bars. Counted here, not timed: lanes, names, the PNG's pixels.
def _crowded(streams: int, kernels: int) -> pd.DataFrame:
    """``kernels`` launches of three kernels, all running at once, spread over ``streams`` streams; a stream's kernels
    last longer the higher its number (its busy time decides whether it keeps a lane of its own)."""
    rows: list[dict[str, Any]] = []
    for i in range(kernels):
        t, stream = 1_000 + i % 97, i % streams
        rows.append({"kind": "runtime", "name": "cudaLaunchKernel", "correlation": i + 1, "pid": 1, "tid": 1,
                     "start_ns": t, "end_ns": t + 1})  # fmt: skip
        rows.append({"kind": "kernel", "name": f"k{i % 3}", "stream": stream, "device": 0, "correlation": i + 1,
                     "start_ns": t + 2, "end_ns": t + 2_000 + stream})  # fmt: skip
    return tl._frame(rows)


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]  # the signature, then IHDR: length, type, width, height (big-endian)
    assert head[:8] == PNG and head[12:16] == b"IHDR"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@pytest.mark.slow
@pytest.mark.parametrize(("streams", "kernels"), [(12_000, 12_000), (50, 40_000)])
def test_a_crowded_timeline_draws_capped_lanes_and_names_and_says_what_it_folded(
    streams: int, kernels: int, tmp_path: Path
) -> None:
    frame = _crowded(streams, kernels)
    analysis = ts.analyze(frame, ts.backend_of(".json"), "crowded.json")
    d = timeline_chart.drawing(frame, analysis, "t")
    assert len(d.lanes) <= 25 and len(d.labels) <= 40
    cap = timeline_chart.MAX_STREAM_LANES
    folded = streams - (cap - 1)
    other = f"{folded:,} other streams"
    busiest = [f"stream {s}" for s in range(streams - cap + 1, streams)]  # the longest kernels: a lane each
    assert d.lanes == (*busiest, other, timeline_chart.OVERLAP_LANE)
    assert len(d.bars) == kernels and {b.lane for b in d.bars} == {*busiest, other}  # every bar drawn, some folded
    assert d.folded == folded and d.wide == kernels  # every bar is wide: all run for most of the stretch
    # the widest bars named, none in the folded lane (bars of many streams, one over another)
    named = min(timeline_chart.MAX_LABELS, sum(b.lane != other for b in d.bars))
    assert len(d.labels) == named and other not in {b.lane for b in d.labels}
    widths = sorted((b.end_us - b.start_us for b in d.bars if b.lane != other), reverse=True)
    assert sorted((b.end_us - b.start_us for b in d.labels), reverse=True) == widths[:named]
    assert d.left_out == (
        f"the {cap - 1} busiest streams in a lane each, {folded:,} others in one; names on the "
        f"{named} widest of {kernels:,} wide bars"
    )
    assert timeline_chart.described(frame, analysis) == f"{d.stretch.what} ({d.left_out})"  # the report's words
    path = tmp_path / "timeline.png"
    timeline_chart.draw_timeline(d, path)
    width, height = _png_size(path)
    assert (width, height) == (1200, round(100 * timeline_chart.figure_inches(d)[1]))
    assert height < 1_600  # 24 stream lanes at most, whatever the capture holds


def test_a_timeline_within_the_caps_leaves_nothing_out() -> None:
    frame, analysis = _fork_join(NSYS_FORK_JOIN)
    d = timeline_chart.drawing(frame, analysis, "t")
    assert d.folded == 0 and d.left_out == "" and len(d.labels) == d.wide <= timeline_chart.MAX_LABELS
    assert timeline_chart.described(frame, analysis) == d.stretch.what


def test_a_label_the_font_cannot_draw_is_a_box_in_the_picture_not_a_warning(tmp_path: Path) -> None:
    # a kernel's name is the user's text: the fault suite's generated names found one ('˯', U+02EF) that DejaVu Sans
    # lacks, and matplotlib's warning then failed a run with warnings as errors
    plt = chart.pyplot()
    fig, ax = plt.subplots()
    ax.set_title("kernel \u02ef")
    out = chart.save_png(fig, tmp_path / "odd.png", dpi=40)  # warnings are errors in this suite
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
