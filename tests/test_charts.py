"""The pictures kbench draws, read as the data they are drawn from (no pixels): the roofline chart's datasheet and
practical roofs and the access pictures' axes, colour bar and title, from real H100 captures and plans."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kbench import pipeline
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.figures import Facts
from kbench.plan.discovery import load_version
from kbench.report import chart
from tests.conftest import DATA

PNG = b"\x89PNG\r\n\x1a\n"
MATMUL = DATA / "kbench_h100" / "annotation_matmul_base.ncu-rep"


# --- the roofline chart ---------------------------------------------------------------------------------------------


def _matmul(tmp_path: Path) -> Any:
    return pipeline.analyze(MATMUL, "annotation", tmp_path, load_version("matmul").from_values({}))


def test_the_roofline_chart_draws_the_practical_roof_the_gains_use_beside_the_datasheet_roof(tmp_path: Path) -> None:
    result = _matmul(tmp_path)
    device = resolve(load_devices(), result.device)
    assert device.spec is not None
    datasheet = device.spec.ceilings()
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
    d = chart.roofline_drawing(result.figures, bare.ceilings(), bare.practical(), "t")
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
