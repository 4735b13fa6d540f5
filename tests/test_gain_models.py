"""Gains from each mechanism's own model on the committed H100 pairs (issue 51, item 4): the estimate against the
gain the fixed twin realized, within 0.67-1.5."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kbench.analysis import opportunities
from kbench.analysis.catalogue import special
from kbench.analysis.catalogue.evidence import Evidence
from kbench.analysis.lines import from_ptx
from kbench.analysis.opportunities import Opportunity
from tests.test_diagnosis import I42, NEW, realized, top
from tests.test_report_json import _evaluate
from tests.test_stage_main_kernel import spied

DIST = "validation_h100_distance"


def _item(run: str, mode: str, metric: str, tmp: Path) -> tuple[float, dict[str, float]]:
    opps, _ = top(run, mode, tmp)
    (found,) = [o for o in opps if o.metric == metric]
    _formula_gives_gain(found)
    return found.gain_pct, found.inputs


def _formula_gives_gain(o: Opportunity) -> None:
    """The waterfall reads each item's formula and inputs: they give its gain."""
    assert _evaluate(o.formula, o.inputs) == pytest.approx(o.gain_pct, abs=1e-9), o.name


def test_masked_tiles_are_priced_on_the_tensor_time_the_kernel_spends(tmp_path: Path) -> None:
    # trimm full computes every tile and masks the upper half away: ncu counts 2.00x the modelled tensor FLOPs. The
    # masked tiles cost tensor-pipe time (66.8% active), not the whole time (the skip twin still loads, stores and
    # waits at its barriers): saved = time x tensor-pipe % x (1 - model / counted); it was time x (1 - model /
    # counted), 50.0% against the 32.6% the skip twin realized (1.53)
    gain, inputs = _item(f"{NEW}/trimm-full", "annotation", "trimm.flops_over_model", tmp_path)
    assert inputs["tensor_pipe_pct"] == pytest.approx(66.8, abs=0.1)
    ratio = gain / realized(f"{NEW}/trimm-full", f"{NEW}/trimm-skip", "annotation")
    assert 0.9 <= ratio <= 1.1, (gain, ratio)


def test_a_busy_special_function_pipe_is_named_with_its_lines(tmp_path: Path) -> None:
    # sfu per_term (annotation, ncu): the XU pipe 78.6% of its peak, the busiest unit; line 27's MUFU.EX2 holds its
    # instructions. Named with the pipe's own model (time x XU% x the lines' share), est. against the factored twin
    run, twin = f"{I42}/sfu-per_term", f"{I42}/sfu-factored"
    opps, _ = top(run, "annotation", tmp_path)
    first = opps[0]
    assert first.metric == "expsum.xu_pipe_pct" and first.name.startswith(
        "Special-function pipe (XU) at 79% of its peak in expsum, the busiest unit: its instructions at _common.py:27"
    )
    assert first.line == 27 and first.change is not None and "exp(x - c) = exp(x) exp(-c)" in first.change
    _formula_gives_gain(first)
    assert 0.67 <= first.gain_pct / realized(run, twin, "annotation") <= 1.5


def _evidence(run: str, mode: str, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Evidence:
    """The Evidence a committed run gives the catalogue (its one stage)."""

    seen = spied(monkeypatch)
    top(run, mode, tmp)
    monkeypatch.undo()
    (e,) = seen
    return e


def test_event_mode_names_the_sampled_special_function_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No PM-sampled capture of an XU-bound kernel is committed (the fdiv pair will be): sfu per_term's real event run
    # (timings, launch records, its PTX's static lines), given the XU figure ncu measured on the same kernel in its
    # annotation run as PM sampling's xu_pct (kbench.analysis.sampling.evidence puts it in the same place)
    run = f"{I42}/sfu-per_term"
    xu = _evidence(run, "annotation", tmp_path, monkeypatch).pipes["xu"]
    plain = _evidence(run, "event", tmp_path, monkeypatch)
    assert "xu" not in plain.pipes and special.xu_bound(plain) is None  # not sampled: no figure, no item
    found = opportunities.diagnose(replace(plain, pipes={"xu": xu}))
    first = max(found, key=lambda o: o.gain_pct)
    assert first.metric == "expsum.xu_pipe_pct" and first.name.endswith("(static)") and first.line == 27
    assert "ex2 x8" in first.name
    _formula_gives_gain(first)
    assert 0.67 <= first.gain_pct / realized(run, f"{I42}/sfu-factored", "event") <= 1.5
    # the static line item says the same line no more: the named pipe explains most of the distance
    assert not any(o.metric.startswith("expsum.line_") for o in found)


def test_an_ieee_division_in_a_loop_is_a_subroutine_call_on_the_xu_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # synthetic PTX and XU figure (no capture of a kernel dividing in a loop is committed yet; 87% is the annotation
    # figure of issue 51's division miss) on sfu per_term's real event evidence: div.rn.f32 inside a loop is an XU
    # line, said to be a subroutine executed per call, and the change offers the fast division
    ptx = "\n".join(
        [
            '.file 1 "k.py"',
            ".loc 1 3 0",
            "ld.global.f32 %f1, [%rd1];",
            "$L__BB0_1:",
            ".loc 1 5 0",
            "div.rn.f32 %f3, %f1, %f2;",
            ".loc 1 6 0",
            "add.f32 %f4, %f4, %f3;",
            "@%p1 bra $L__BB0_1;",
        ]
    )
    model = from_ptx("k", ptx, read=lambda _: ["", "", "", "", "", "    acc += x / d", "    i += 1"])
    (line,) = [x for x in model.lines if x.line == 5]
    assert line.opcodes == {"div.rn.f32": 1.0} and line.looped > 0
    e = replace(_evidence(f"{I42}/sfu-per_term", "event", tmp_path, monkeypatch), pipes={"xu": 87.0}, lines=model)
    o = special.xu_bound(e)
    assert o is not None and "div.rn.f32 x1 (IEEE division: a call into a subroutine" in o.name
    assert o.change is not None and o.change.startswith("where IEEE rounding is not needed, an approximate division")
    # the IEEE division weighs 2 MUFUs on the XU pipe (conf/devices.json, the fdiv pair), the approximate one 1
    assert o.inputs["xu_removable_share"] == pytest.approx(0.5)


@pytest.mark.parametrize("mode", ["event", "annotation"])
def test_the_division_pair_names_the_xu_pipe_and_its_line(mode: str, tmp_path: Path) -> None:
    """fdiv (issue 51, H100): an IEEE division per term (tl.math.div_rn) against a reciprocal square root: event mode
    (PM-sampled XU 86%) and annotation mode name the pipe and the line; the gain from the pipe's own model (half
    its work removable) against the realized 54%."""
    run = f"{DIST}/fdiv-before"
    opps, _ = top(run, mode, tmp_path)
    first = opps[0]
    assert first.metric == "ratios.xu_pipe_pct" and first.line == 24 and "div_rn" in (first.code or "")
    # each route the change names, with its effect measured on the H100 (fdiv's three versions)
    assert "x / y (div.full.f32) 766.9 us (-36%)" in (first.change or "")
    _formula_gives_gain(first)
    assert 0.67 <= first.gain_pct / realized(run, f"{DIST}/fdiv-after", mode) <= 1.5
