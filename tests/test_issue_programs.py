"""The issue roof (warp instructions issued against 4 per clock per SM x SMs x the measured SM clock) on real H100 ncu
reports, checked against ncu's own issue-slot percentage; the issue-bound item's trigger and gain; the work each
program of a stage does (access runs) and the uneven-programs item on a triangular grid, a grid where one program does
64x the work, and a uniform grid; the intra timeline's longest CTAs named."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kbench.analysis import ncu
from kbench.analysis.access import program_work
from kbench.analysis.access_facts import Predicted
from kbench.analysis.access_figures import _programs
from kbench.analysis.catalogue import issue, programs
from kbench.analysis.catalogue.evidence import Evidence
from kbench.analysis.catalogue.launch import measured_tail
from kbench.analysis.counters import combine
from kbench.analysis.devices import load_devices
from kbench.analysis.intra import Record, analyse
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.capture.access import Access
from tests.conftest import DATA

REPS = DATA / "ncu_h100"  # the H100 captures of shared/fixtures/h100, copied unchanged (its README beside them)
H100 = load_devices().devices["H100_SXM"]
ROOF = Ceilings(tflops=62.4, gbps=3095.1, source="test")


@pytest.mark.parametrize("name", ["full_mm", "full_add"])
def test_the_issue_roof_equals_ncus_own_issue_percentage(name: str) -> None:
    import ncu_report

    path = REPS / f"{name}.ncu-rep"
    c = combine(name, ncu.kernels(path))
    assert c.inst_counter == "smsp__inst_issued.sum" and c.inst_issued and c.sm_cycles
    f = _figures(c.duration_us, flops=None, nbytes=None)
    e = Evidence(stage=f, total_us=c.duration_us, practical=None, limits=H100.limits, issued=c.inst_issued,
                 sm_cycles=c.sm_cycles)  # fmt: skip
    r = issue.roof(e)
    assert r is not None and r.rate == 4
    action = ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(0)
    own = action.metric_by_name("sm__inst_issued.avg.pct_of_peak_sustained_elapsed").as_double()
    assert r.pct == pytest.approx(own, rel=0.01)  # full_mm 21.0%, full_add 3.9%: the same roof ncu measures against


def _figures(us: float, flops: float | None, nbytes: float | None, **kw: Any) -> StageFigures:
    return StageFigures(name="s", precision="fp32", flops=flops, dram_bytes=nbytes, timing=TimingStats.of([us]),
                        duration_us=us, tflops=None, gbps=None, intensity=None, **kw)  # fmt: skip


def _issue_evidence(issued: float, flops: float | None = 1e9, nbytes: float = 1e8, **kw: Any) -> Evidence:
    # 100 us on 132 SMs at 1980 MHz: 2.6136e7 SM cycles, an issue roof of 1.04544e8 warp instructions
    f = _figures(100.0, flops, nbytes)
    return Evidence(stage=f, total_us=100.0, practical=ROOF, limits=H100.limits, sm_count=132, issued=issued,
                    issued_counter="smsp__inst_issued.sum", sm_cycles=132 * 1980e6 * 100e-6, **kw)  # fmt: skip


def test_an_issue_bound_stage_gets_the_item_with_the_mechanisms_gain() -> None:
    capacity = 4 * 132 * 1980e6 * 100e-6
    found = issue.issue_bound(_issue_evidence(0.9 * capacity, nbytes=1e7))
    assert found is not None and found.metric == "s.issue_roof_pct" and found.value == "90.0%"
    # the modelled work needs 1e9 / 64 + 1e7 / 512 warp instructions at least; the time scales with the instructions
    need = 1e9 / 64 + 1e7 / 512
    assert found.gain_pct == pytest.approx(100.0 * (1.0 - need / (0.9 * capacity)))
    # never below the practical roof: 1e8 bytes take 32.3 of the 100 us at 3095.1 GB/s
    capped = issue.issue_bound(_issue_evidence(0.9 * capacity))
    assert capped is not None and capped.gain_pct == pytest.approx(100.0 - 1e8 / 3095.1e3)
    assert "Issue-bound s:" in found.name and f"{1e9 / (0.9 * capacity) / 32:.2f} modelled FLOPs" in found.name
    assert "tl.dot" in (found.change or "")


def test_the_issue_bound_item_stays_silent_where_another_ceiling_is_nearer() -> None:
    capacity = 4 * 132 * 1980e6 * 100e-6
    assert issue.issue_bound(_issue_evidence(0.7 * capacity)) is None  # under 80% of the issue roof
    assert issue.issue_bound(_issue_evidence(0.9 * capacity, pipes={"xu": 95.0})) is None  # the SFU pipe is nearer
    assert issue.issue_bound(_issue_evidence(0.9 * capacity, nbytes=2.9e11)) is None  # DRAM at 94% of its roof
    # the instructions are the work: an FMA loop whose FLOPs need 90% of what it issued
    assert issue.issue_bound(_issue_evidence(0.9 * capacity, flops=0.81 * capacity * 64, nbytes=0.0)) is None
    assert issue.issue_bound(_issue_evidence(0.9 * capacity, flops=None)) is None  # no model to bound the gain


def test_the_validation_runs_get_no_issue_bound_item_where_a_pipe_or_the_fp32_roof_sets_the_time() -> None:
    from tests.test_diagnosis import top

    for run in ("h100_1125/ilp-parallel", "h100_1125/fp64-single", "h100_1125/stream-many"):
        opps, _ = top(run, "annotation")
        assert not any(o.name.startswith("Issue-bound") for o in opps), run


def _access(program: int, lanes: int, weight: int = 1, active: int | None = None) -> Access:
    mask = np.zeros(lanes, dtype=bool)
    mask[: lanes if active is None else active] = True
    return Access("load", "k.py:3", "k", (program, 0, 0), np.arange(lanes, dtype=np.int64) * 4, mask, 4, 0, weight)


def test_program_work_weighs_the_sampled_programs() -> None:
    triangular = [_access(i, 128) for i in range(64) for _ in range(i + 1)]  # program i loops i + 1 times
    w = program_work(triangular)
    assert w is not None and w["max_bytes"] == 64 * 128 * 4 and w["mean_bytes"] == pytest.approx(32.5 * 128 * 4)
    assert w["longest"][0] == [[63, 0, 0], 64 * 512] and w["traced"] == 64
    one_heavy = [_access(i, 128) for i in range(64)] + [_access(5, 128) for _ in range(63)]
    heavy = program_work(one_heavy)
    assert heavy is not None and heavy["max_bytes"] / heavy["mean_bytes"] == pytest.approx(64 / (127 / 64))
    # a sample: program 0 stands for itself, program 1 for 99 programs of its size
    sampled = program_work([_access(0, 128), *[_access(1, 128, weight=99) for _ in range(2)]])
    assert sampled is not None and sampled["mean_bytes"] == pytest.approx((512 + 99 * 1024) / 100)
    uniform = program_work([_access(i, 128, active=128 if i < 63 else 100) for i in range(64)])  # masked tail
    assert uniform is not None and uniform["max_bytes"] / uniform["mean_bytes"] < 1.01
    assert program_work([_access(0, 128, active=0)]) is None


def _predicted(work: dict[str, Any] | None) -> Predicted:
    p = Predicted("at n=64", None, None, None, None, None, 0.0, 0.0, None, 0, None)
    return Predicted(**{**p.__dict__, **_programs(work)})


def _program_evidence(work: dict[str, Any] | None, us: float = 100.0, nbytes: float = 3e7, **kw: Any) -> Evidence:
    f = _figures(us, 0.0, nbytes)
    return Evidence(stage=f, total_us=us, practical=ROOF, sm_count=132, predicted=_predicted(work), **kw)


def test_uneven_programs_on_a_triangular_grid_and_a_64x_program() -> None:
    tri = program_work([_access(i, 128) for i in range(64) for _ in range(i + 1)])
    found = programs.uneven_programs(_program_evidence(tri, ctas=64, ctas_per_sm=1.0))
    assert found is not None and found.metric == "s.program_work_max_over_mean" and found.value == "1.97"
    assert found.gain_pct == pytest.approx(100.0 * (1.0 - 32.5 / 64))  # one wave: 1 - mean / max
    assert "program (63, 0, 0)" in found.name and "persistent grid" in (found.change or "")
    # counters add the occupancy the SMs achieved against what the launch limits allow
    counted = _program_evidence(tri, ctas=64, ctas_per_sm=1.0, theoretical_occupancy_pct=50.0)
    counted = replace(counted, stage=counted.stage.model_copy(update={"occ_pct": 31.0}))
    named = programs.uneven_programs(counted)
    assert named is not None and named.name.endswith("; achieved occupancy 31% of the theoretical 50%")
    heavy = program_work([_access(i, 128) for i in range(64)] + [_access(5, 128) for _ in range(63)])
    found = programs.uneven_programs(_program_evidence(heavy, nbytes=3e6, ctas=64, ctas_per_sm=1.0))
    assert found is not None and found.gain_pct == pytest.approx(100.0 * (1.0 - (127 / 64) / 64))
    # 4 waves of 132: the makespan model, mean x (w - 1) + max against mean x w
    many = programs.uneven_programs(_program_evidence(tri, ctas=528, ctas_per_sm=1.0))
    spread = 64 / 32.5
    assert many is not None and many.gain_pct == pytest.approx(100.0 * (spread - 1) / (3 + spread))


def test_uneven_programs_stay_silent_on_even_work_a_busy_unit_or_a_measured_tail() -> None:
    uniform = program_work([_access(i, 128) for i in range(64)])
    assert programs.uneven_programs(_program_evidence(uniform, ctas=64)) is None
    tri = program_work([_access(i, 128) for i in range(64) for _ in range(i + 1)])
    assert programs.uneven_programs(_program_evidence(tri, nbytes=2.8e8, ctas=64)) is None  # DRAM at 90%
    assert programs.uneven_programs(_program_evidence(tri, ctas=64, tail_idle_pct=30.0)) is None  # intra measured it
    assert programs.uneven_programs(_program_evidence(None, ctas=64)) is None  # an access run before this record


def test_the_measured_tail_names_the_longest_ctas() -> None:
    # CTA i runs (i + 1) us on its own SM: the last one sets the end
    records = [Record(cta=i, sm=i, warp=0, task="loop", start_us=0.0, end_us=float(i + 1)) for i in range(8)]
    a = analyse(records, device_sms=8)
    assert a.longest == ((7, 8.0), (6, 7.0), (5, 6.0))
    f = _figures(8.0, 0.0, 1e3)
    e = Evidence(stage=f, total_us=8.0, practical=ROOF, cta_imbalance=a.imbalance, longest_programs=a.longest_words())
    found = measured_tail(e, a.tail_idle_pct)
    assert found is not None and "(longest: CTA 7: 8.0 us, CTA 6: 7.0 us, CTA 5: 6.0 us)" in found.name
    assert "launch them first" in (found.change or "")


def test_the_annotation_list_asks_for_issued_instructions() -> None:
    assert "smsp__inst_issued.sum" in ncu.ANNOTATION_METRICS
    # captures made before it fall back to the instructions executed (a floor: replays left out), and say so
    from tests.test_diagnosis import folder_of

    path = folder_of("h100_1125/ilp-parallel", "annotation") / "profile.ncu-rep"
    c = combine("poly", ncu.kernels(path))
    assert c.inst_counter == "smsp__inst_executed.sum" and c.inst_issued == pytest.approx(34373632.0)
    assert DATA.is_dir()


@pytest.mark.slow
def test_an_access_run_predicts_each_programs_work_and_the_gpu_modes_get_it(tmp_path: Path) -> None:
    """A causal (triangular) row sum traced under the CPU interpreter: program r sums r + 1 blocks; its paired twin
    gives every program n + 1 blocks. The spread reaches predicted.json's record and the catalogue."""
    from kbench.analysis.access_figures import predicted_of
    from kbench.analysis.records import predictions
    from tests.test_access_mode import access, report_of

    spreads = {}
    for version in ("triangular", "paired"):
        out = tmp_path / version
        done = access(out, "uneven", version, "--rows=64", kernel_path=str(DATA / "program_kernels"))
        assert done.returncode == 0, done.stderr
        run, _ = report_of(out, "uneven")
        (p,) = predicted_of(json.loads((run / "access.json").read_text())).values()
        assert predictions({"prefix": p.record()}, run / "predicted.json")["prefix"] == p  # what GPU runs read back
        spreads[version] = p
    tri, paired = spreads["triangular"], spreads["paired"]
    # 64 x 512 B + the 4-byte store against the mean program's 32.5 x 512 + 4
    assert tri.program_spread == pytest.approx((64 * 512 + 4) / (32.5 * 512 + 4))
    assert tri.longest_programs[0] == "program (63, 0, 0): 3.28e+04 B" and paired.program_spread == 1.0
    f = _figures(100.0, 0.0, 3e6)
    found = programs.uneven_programs(Evidence(stage=f, total_us=100.0, practical=ROOF, sm_count=132, ctas=64,
                                              ctas_per_sm=1.0, predicted=tri))  # fmt: skip
    assert found is not None and found.gain_pct == pytest.approx(100.0 * (1 - 1 / (tri.program_spread or 0.0)))
    assert (
        programs.uneven_programs(replace(Evidence(stage=f, total_us=100.0, practical=ROOF), predicted=paired)) is None
    )


def test_one_long_program_is_named_in_event_mode_with_an_access_run_of_the_same_point() -> None:
    """ragged per_segment on the H100 (event mode, tests/data/issue42_h100): segment 0 holds half of x, one program
    per segment; the access run at the same parameters (CPU) predicts program 0 moves 512x the mean program's bytes.
    Its chunked twin (equal chunks) realized 99.3%; it gets no such item."""
    from tests.test_diagnosis import realized, top

    opps, _ = top("issue42_h100/ragged-per_segment", "event")
    first = opps[0]
    assert first.name.startswith("Uneven programs in segsum: its largest program loads and stores 512.41x")
    assert "program (0, 0, 0): 3.36e+07 B)" in first.name  # the ordinary programs beside it are not listed
    gain = realized("issue42_h100/ragged-per_segment", "issue42_h100/ragged-chunked", "event")
    assert 0.67 <= first.gain_pct / gain <= 1.5, (first.gain_pct, gain)
    twin, _ = top("issue42_h100/ragged-chunked", "event")
    assert not any(o.name.startswith("Uneven programs") for o in twin)


def _csv_kernels(run: str) -> list[ncu.Kernel]:
    """An ncu-mode run's kernels.csv (every metric kbench reads, one row per kernel) as ncu.Kernel records."""
    import csv

    text = (DATA / "issue42_h100" / "ncu" / run / "kernels.csv").read_text()
    rows = list(csv.DictReader(text.splitlines()))
    num = lambda v: float(v) if v not in ("", "n/a", None) else None  # noqa: E731
    return [
        ncu.Kernel(
            index=int(r["index"]),
            name=r["kernel"],
            nvtx=[],
            grid=None,
            block=None,
            metrics={k: num(r[k]) for k in ncu.ALIASES if k in r},
            tensor_flops=num(r["tensor_flops"]),
            scalar_flops=num(r["scalar_flops"]),
        )
        for r in rows
    ]


def test_the_issue_roof_of_the_h100_pairs_kernels_csv() -> None:
    """divmod modulo (a % per tap) fills 76% of the issue roof by its executed instructions (ncu's issue slots: 80.5%
    of active cycles), under ISSUE_BOUND_PCT: no item; sfu per_term's special-function pipe (79%) is busier than its
    issue slots (78%): the nearer ceiling. Streaming kernels sit far under it."""
    pct = {}
    for run in ("divmod-modulo", "sfu-per_term", "convert-torch_cast", "ragged-per_segment"):
        ks = _csv_kernels(run)
        c = combine(run, ks[:1])
        f = _figures(c.duration_us, None, None)
        e = Evidence(stage=f, total_us=c.duration_us, practical=None, limits=H100.limits, issued=c.inst_issued,
                     sm_cycles=c.sm_cycles, pipes=c.pipes)  # fmt: skip
        r = issue.roof(e)
        assert r is not None and c.inst_counter == "smsp__inst_executed.sum"
        pct[run] = round(r.pct, 1)
    assert pct == {"divmod-modulo": 76.4, "sfu-per_term": 78.4, "convert-torch_cast": 51.1, "ragged-per_segment": 0.1}


def test_the_h100_matmuls_even_ctas_are_not_named() -> None:
    """matmul v2's 512 CTAs on the H100 (intra mode's record): the slowest took 1.08x the mean: the measured tail
    item, where it fires, names no longest CTAs."""
    import lzma

    from kbench.analysis import intra

    trace = lzma.decompress((DATA / "intra_h100" / "v2_intra-mm.json.xz").read_bytes()).decode()
    a = intra.analyse(intra.from_proton_trace(trace), 132)
    assert a.longest[0][0] == 142 and a.imbalance == pytest.approx(1.08, abs=0.005)
    f = _figures(a.span_us, 0.0, 1e3)
    e = Evidence(
        stage=f, total_us=a.span_us, practical=ROOF, cta_imbalance=a.imbalance, longest_programs=a.longest_words()
    )
    found = measured_tail(e, a.tail_idle_pct)
    assert found is not None and "longest:" not in found.name and "launch them first" not in (found.change or "")


def _counted(path: Path, name: str) -> Any:
    """The stage counters of the kernel ``name`` in a real ncu report."""
    return combine(name, [k for k in ncu.kernels(path) if k.name == name])


@pytest.fixture(scope="module")
def ragged_rep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import lzma

    out = tmp_path_factory.mktemp("ragged") / "profile.ncu-rep"
    out.write_bytes(lzma.decompress((DATA / "issue42_h100/ncu/ragged-per_segment/profile.ncu-rep.xz").read_bytes()))
    return out


def _busy_evidence(c: Any, us: float, nbytes: float) -> Evidence:
    practical = Ceilings(tflops=62.4, gbps=3095.1, source="measured")
    return Evidence(
        stage=_figures(us, 1.0, nbytes),
        total_us=us,
        practical=practical,
        sm_count=int(c.sm_count),
        ctas=c.ctas,
        ctas_per_sm=c.ctas_per_sm,
        sm_busy_pct=c.sm_busy_pct,
    )


def test_idle_sms_from_the_counters_name_the_longest_program(ragged_rep: Path) -> None:
    # ragged per_segment on the H100: program 0 streams half of x alone; the average SM was busy ~1% of its cycles
    c = _counted(ragged_rep, "segment_kernel")
    assert c.sm_busy_pct == pytest.approx(1.1, abs=0.2) and c.ctas == 1025
    o = programs.idle_sms(_busy_evidence(c, c.duration_us, 4.0 * (1 << 24)))
    assert o is not None and o.name.startswith("SMs idle while the longest programs run in s: the average SM")
    assert o.metric == "s.sm_busy_pct" and "pair each long program" in (o.change or "")
    assert 95.0 < o.gain_pct < 99.5  # realized by the chunked twin: 99.3% (event), 99.2% (annotation)


@pytest.mark.parametrize("name", ["full_add", "full_mm"])
def test_evenly_busy_sms_get_no_idle_item(name: str) -> None:
    (k,) = ncu.kernels(REPS / f"{name}.ncu-rep")
    c = combine(k.name, [k])
    assert c.sm_busy_pct is not None and c.sm_busy_pct > 95.0
    assert programs.idle_sms(_busy_evidence(c, c.duration_us, 1e9)) is None


def test_a_grid_smaller_than_the_gpu_is_the_underfilled_items_not_this(ragged_rep: Path) -> None:
    c = _counted(ragged_rep, "segment_kernel")
    few = _busy_evidence(c, c.duration_us, 4.0 * (1 << 24))
    assert programs.idle_sms(replace(few, ctas=64)) is None
