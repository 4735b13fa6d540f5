"""The distance waterfall (kbench.analysis.waterfall) on real H100 captures re-analysed here: every step a measured
cause, the steps and the unexplained rest adding up to the stage's distance to its practical roof, no Top-3 item
promising more than its step, and a counted stage's unexplained rest never leading Top 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench.analysis.figures import PlanFigures
from kbench.report import waterfall_chart
from tests.test_diagnosis import analysed


def figures(run: str, mode: str, tmp: Path) -> PlanFigures:
    return analysed(run, mode, tmp)


RUNS = [
    ("h100_1125/trimm-full", "annotation"),
    ("h100_1125/tile_mm-narrow", "annotation"),
    ("validation_h100_1127/sfu-per_term", "annotation"),
    ("validation_h100_1127/divmod-modulo", "event"),
    ("validation_h100_sampled/ragged-chunked", "event"),
]


@pytest.mark.parametrize(("run", "mode"), RUNS)
def test_the_steps_and_the_rest_add_up_to_the_distance(run: str, mode: str, tmp_path: Path) -> None:
    f = figures(run, mode, tmp_path)
    assert f.waterfalls, "a stage with a practical roof has a waterfall"
    for w in f.waterfalls:
        assert w.roof_us + sum(s.us for s in w.steps) + w.unexplained_us == pytest.approx(max(w.measured_us, w.roof_us))
        assert all(s.us > 0 and s.by for s in w.steps)
        assert w.unexplained_us >= 0


@pytest.mark.parametrize(("run", "mode"), RUNS)
def test_no_item_promises_more_than_its_step(run: str, mode: str, tmp_path: Path) -> None:
    f = figures(run, mode, tmp_path)
    steps = {(w.stage, s.item): s.points for w in f.waterfalls for s in w.steps if s.item}
    for o in f.opportunities:
        if o.rest or o.stop or o.metric.endswith("host_gap_pct") or o.stage is None:
            continue
        assert o.gain_pct <= steps[(o.stage, o.name)] + 1e-6, o.name


def test_work_beyond_the_model_is_a_step_priced_on_the_roof(tmp_path: Path) -> None:
    """trimm full computes its masked upper triangle: ncu counted 2.00x the plan's tensor FLOPs, priced on the tensor
    pipe's measured busy time (33.4 points; its twin realized 32.6); the counted stall reasons share the rest: at most
    15 points unexplained (59.4 before issue 51)."""
    (w,) = figures("h100_1125/trimm-full", "annotation", tmp_path).waterfalls
    first = w.steps[0]
    assert first.name.startswith("Work beyond the model in trimm: ncu counted 2.00x")
    assert first.points == pytest.approx(33.4, abs=0.1)
    assert w.unexplained_points <= 15.0
    assert not w.not_measured or "warp stalls" not in w.not_measured


def test_a_counted_stage_never_leads_with_its_unexplained_rest(tmp_path: Path) -> None:
    """ragged chunked (PM-sampled event run, 87% of its roof): the sampled idle SMs (67.2% busy) are its step and
    its item; nothing is left unexplained, and Top 1 is that measured cause."""
    f = figures("validation_h100_sampled/ragged-chunked", "event", tmp_path)
    (w,) = f.waterfalls
    assert w.counted
    assert [s.name.split(":")[0] for s in w.steps] == ["SMs idle in segsum"]
    assert f.opportunities[0].metric == "segsum.sm_busy_pct"
    assert not any(o.rest for o in f.opportunities)


def test_an_uncounted_event_run_says_what_it_did_not_measure(tmp_path: Path) -> None:
    f = figures("validation_h100_1127/divmod-modulo", "event", tmp_path)
    (w,) = f.waterfalls
    assert not w.counted
    assert "warp stalls" in w.not_measured


def test_the_picture_draws_every_step(tmp_path: Path) -> None:
    f = figures("validation_h100_1127/sfu-per_term", "annotation", tmp_path)
    (w,) = f.waterfalls
    bars = waterfall_chart.bars(w)
    assert bars[0].kind == waterfall_chart.ROOF and bars[-1].kind == waterfall_chart.MEASURED
    assert bars[-2].bottom + bars[-2].height == pytest.approx(w.measured_us)  # the steps stack up to the time
    assert waterfall_chart.waterfall_png(f.waterfalls, tmp_path / "d.png", "t") is not None
    assert (tmp_path / "d.png").stat().st_size > 0


D51 = "validation_h100_distance"  # issue 51's design-distance pairs on the H100 (event runs PM-sampled)
BEFORES = ["scores-before", "epilogue-before", "splitk_gemm-before", "splitkv-before", "fdiv-before",
           "twopass-before", "persist-before", "gather-before", "mla_decode-v6"]  # fmt: skip


@pytest.mark.parametrize("mode", ["event", "annotation"])
@pytest.mark.parametrize("run", BEFORES)
def test_a_design_distance_is_accounted_for(run: str, mode: str, tmp_path: Path) -> None:
    """Issue 51's bar: on every pair's "before", at most 15 points of the distance to the practical roof are left
    unexplained, and Top 1 is a measured cause, never the unexplained rest."""
    f = figures(f"{D51}/{run}", mode, tmp_path)
    assert sum(w.unexplained_points for w in f.waterfalls) <= 15.0
    assert not f.opportunities[0].rest


@pytest.mark.parametrize("mode", ["event", "annotation"])
def test_a_split_that_costs_nothing_gets_stop(mode: str, tmp_path: Path) -> None:
    """splitkv: the split decode's partials are 2.2 MB against 2.2 GB of K and V; the stage runs at 99% of the
    DRAM roof and the fix realized 0.8-1.0%: "stop", no exchange item for the partials."""
    f = figures(f"{D51}/splitkv-before", mode, tmp_path)
    assert f.opportunities[0].stop
    assert not any(o.metric.endswith("exchanged_bytes_pct") for o in f.opportunities)


@pytest.mark.parametrize("mode", ["event", "annotation"])
@pytest.mark.parametrize("run", ["scores-after", "epilogue-after", "splitk_gemm-after"])
def test_one_fused_kernel_gets_no_exchange_or_work_item(run: str, mode: str, tmp_path: Path) -> None:
    """The fused twins: no exchange through DRAM and no work beyond the model is claimed (PM sampling's tensor pipe %
    counts active cycles, 1.15-1.26x what their FLOPs need: it is not read as work)."""
    f = figures(f"{D51}/{run}", mode, tmp_path)
    said = [o.metric.split(".", 1)[1] for o in f.opportunities]
    assert not {"exchanged_bytes_pct", "flops_over_model", "dram_bytes_over_model"} & set(said), said


def test_a_stage_of_two_kernels_says_where_its_time_went(tmp_path: Path) -> None:
    """scores before: the two kernels' times and the DRAM bytes ncu measured for each, on the practical bandwidth;
    the exchange step's short name keeps what it is without its figures."""
    (w,) = figures(f"{D51}/scores-before", "annotation", tmp_path).waterfalls
    assert [k.name for k in w.kernels] == ["scores_kernel", "softmax_pv_kernel"]
    assert sum(k.us for k in w.kernels) == pytest.approx(w.measured_us, rel=0.01)
    assert all(k.dram_bytes and k.dram_roof_us and k.dram_roof_us < k.us for k in w.kernels)
    assert w.steps[0].short == "Kernels scores_kernel and softmax_pv_kernel of attention exchange 1.08 GB through DRAM"
    assert w.steps[1].short == "SMs idle in attention (kernel scores_kernel, 52% of the stage)"


def committed_runs() -> list[tuple[str, str]]:
    """Every committed GPU run test_diagnosis.analysed re-analyses, as (run, mode): the runs of tests/data's
    validation_h100*, validation_h200 and issue42_h100 folders whose capture is committed (event: timings.json;
    annotation and ncu: the .ncu-rep)."""
    from tests.conftest import DATA

    found: list[tuple[str, str]] = []
    for top in sorted(p for p in DATA.iterdir() if p.name.startswith("validation_h") or p.name == "issue42_h100"):
        for result in sorted(top.glob("*/*/result.json")):
            a, b = result.parent.relative_to(top).parts
            name, mode = (b, a) if top.name == "issue42_h100" else (a, b)
            capture = ["timings.json"] if mode == "event" else ["profile.ncu-rep", "profile.ncu-rep.xz"]
            if mode in ("event", "annotation", "ncu") and any((result.parent / c).is_file() for c in capture):
                found.append((f"{top.name}/{name}", mode))
    return found


def test_every_committed_run_is_walked() -> None:
    runs = committed_runs()
    assert len(runs) > 150 and {m for _, m in runs} == {"event", "annotation", "ncu"}
    assert ("validation_h200/softmax-three_pass", "annotation") in runs


@pytest.mark.parametrize(("run", "mode"), committed_runs())
def test_every_committed_run_adds_up_and_no_item_exceeds_the_waterfall(run: str, mode: str, tmp_path: Path) -> None:
    """On every committed capture: each stage's roof, steps and unexplained rest add up to its measured time, and no
    Top-3 item promises more than its step (an item with no step of its own: more than its stage's distance)."""
    f = figures(run, mode, tmp_path)
    steps = {(w.stage, s.item): s.points for w in f.waterfalls for s in w.steps if s.item}
    gaps = {w.stage: w.gap_points for w in f.waterfalls}
    for w in f.waterfalls:
        assert w.roof_us + sum(s.us for s in w.steps) + w.unexplained_us == pytest.approx(max(w.measured_us, w.roof_us))
        assert w.unexplained_us >= 0 and all(s.us > 0 for s in w.steps)
    for o in f.opportunities:
        if o.rest or o.stop or o.metric.endswith("host_gap_pct") or o.stage not in gaps:
            continue
        assert o.gain_pct <= steps.get((o.stage, o.name), gaps[o.stage]) + 1e-6, o.name


def test_the_busiest_units_headroom_is_held_to_the_distance(tmp_path: Path) -> None:
    """tile_mm base (annotation, 80% of its practical roof): no catalogue item, its stall shares the whole waterfall;
    the fallback "raise compute toward its peak" promised 31.1 points (the datasheet's peak) where the distance to the
    practical roof is 19.7."""
    from tests.test_report_json import _evaluate

    f = figures("validation_h100_1125/tile_mm-base", "annotation", tmp_path)
    (w,) = f.waterfalls
    (o,) = [o for o in f.opportunities if o.metric == "mm.compute_pct"]
    assert o.gain_pct == pytest.approx(w.gap_points) and 19.0 < o.gain_pct < 20.5
    assert _evaluate(o.formula, o.inputs) == pytest.approx(o.gain_pct)


def test_the_warps_in_no_partition_take_no_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # mla_decode v16 at b=4 s=16 (annotation, the H100): its attention kernel launches 12 warps, 9 in partitions; the
    # other 3 wait at a barrier on the kernel's def line for the whole run (35% of all its stall samples). As the stall
    # items leave them out, so does the distance: before, "stall on barrier" took 5.17 us of partial's 16.1 us
    run = "validation_h100_serving/mla_decode-v16-b4"

    def barrier_us() -> float:
        (fall,) = [w for w in analysed(run, "annotation").waterfalls if w.stage == "partial"]
        return next(s.us for s in fall.steps if s.name.startswith("stall on barrier"))

    without = barrier_us()
    monkeypatch.setattr("kbench.analysis.waterfall.idle_share", lambda e, reason: 0.0)  # counted as before
    assert barrier_us() == pytest.approx(5.17, abs=0.01) and without == pytest.approx(2.30, abs=0.01)
