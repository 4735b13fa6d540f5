"""Time by source line on issue 42's real H100 captures (tests/data/issue42_h100, see its README): the two unseen
pairs whose cause sits in one source line (sfu per_term: exp of a difference inside the loop; divmod modulo: a
modulo by a run-time value inside the loop) and their twins. Evidence is rebuilt from each run's result.json (the
stage's figures and, in annotation mode, its counters) with the line model from the kernel's own files."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kbench.analysis import lines, ncu, ncu_source
from kbench.analysis import opportunities as op
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.lines import LineModel
from kbench.analysis.stages import StageFigures
from tests.conftest import DATA

H42 = DATA / "issue42_h100"
COUNTED = ("ld_sectors", "ld_use", "st_sectors", "st_use", "stalls", "pipes")


def evidence(mode: str, version: str, model: LineModel | None) -> op.Evidence:
    """The stage of ``mode``'s run of ``version`` as its catalogue saw it, with ``model`` as its lines."""
    r = json.loads((H42 / mode / version / "result.json").read_text())
    f = StageFigures.model_validate(r["figures"]["stages"][0])
    spec = resolve(load_devices(), "NVIDIA H100 80GB HBM3").spec
    assert spec is not None
    counted: dict[str, Any] = {}
    if mode == "annotation":
        c = r["sections"]["counters"]["stages"][0]
        counted = {k: c[k] for k in COUNTED}
    return op.Evidence(stage=f, total_us=r["figures"]["total_us"], practical=spec.practical()[f.precision],
                       lines=model, **counted)  # fmt: skip


def static(version: str) -> LineModel:
    (model,) = lines.compiled(H42 / "compiled" / version)
    return model


def line_items(found: list[op.Opportunity]) -> list[op.Opportunity]:
    return [o for o in found if "line_" in o.metric]


def test_event_mode_names_the_special_function_line_statically_and_not_its_twin() -> None:
    # before: "Unexplained 81.3 points"; the PTX's loop is the exp line: sub, mul, ex2, add per element
    e = evidence("event", "sfu-per_term", static("sfu-per_term"))
    (item,) = line_items(op.diagnose(e))
    assert item.name.startswith("Line _common.py:27 holds 92% of the instructions inside expsum_kernel's loops")
    assert "(static)" in item.name and "ex2 x8 (special-function unit (XU))" in item.name
    assert item.change is not None and item.change.startswith("fewer special functions per element")
    # the whole distance to the roof (no launch facts here, so no wave item): the line's 92% caps nothing
    assert item.gain_pct == pytest.approx(e.gain(e.gap_us)) and item.gain_pct == pytest.approx(84.4, abs=0.1)
    # its twin runs at its roof: stop, nothing else
    (stop,) = op.diagnose(evidence("event", "sfu-factored", static("sfu-factored")))
    assert stop.stop


def test_event_mode_names_the_modulo_line_and_not_the_compare_twin() -> None:
    # before: "Unexplained 75.6 points"; rem.s32 x8 in the loop, weighed as the SASS sequence each becomes
    model = static("divmod-modulo")
    hot = next(x for x in model.lines if x.line == 22)
    assert hot.opcodes == {"rem.s32": 8, "add.s32": 1} and hot.looped == 8 * lines.PTX_DIVISION_SASS + 1
    (item,) = line_items(op.diagnose(evidence("event", "divmod-modulo", model)))
    assert "Line _common.py:22 holds 70% of the instructions inside window_kernel's loops" in item.name
    assert "integer division or modulo by a value known only at run time" in item.name
    assert item.change is not None and item.change.startswith("make the divisor a tl.constexpr")
    # the twin (a compare and subtract instead of %): its loop is index arithmetic and loads, nothing costly
    assert line_items(op.diagnose(evidence("event", "divmod-compare", static("divmod-compare")))) == []


def test_the_sass_listings_agree_with_the_ptx() -> None:
    # nvdisasm -g of the sfu kernel: MUFU.EX2 on the exp line, 59 of the loop's 64 SASS instructions
    sfu = lines.from_sass_listing("expsum_kernel", (H42 / "sass" / "sfu-expsum_kernel.sass").read_text())
    hot = sfu.lines[0]
    assert (hot.line, hot.opcodes["MUFU.EX2"], hot.looped, sfu.looped) == (27, 8, 59, 64)
    (item,) = line_items(op.diagnose(evidence("event", "sfu-per_term", sfu)))
    assert "MUFU.EX2 x8 (special-function unit (XU))" in item.name and "(static)" in item.name
    # the divmod listing is of the compare twin (tl.where(idx >= n, idx - n, idx)): no division, no item; the
    # trap after EXIT (a branch to itself) is no loop
    twin = lines.from_sass_listing("window_kernel", (H42 / "sass" / "divmod-window_kernel.sass").read_text())
    assert not any(o.startswith(("MUFU", "I2F")) for x in twin.lines for o in x.opcodes)
    assert sum(1 for x in twin.lines if x.looped == 1 and x.instructions > 10) == 0
    assert line_items(op.diagnose(evidence("event", "divmod-modulo", twin))) == []


def test_annotation_with_source_counters_moves_the_estimate_to_the_modulo_line() -> None:
    # ncu --section SourceCounters of divmod modulo's kernel: the modulo line holds 67% of the instructions and 66%
    # of the warp-state samples; the division sequence (I2F.RP, MUFU.RCP, IMAD.HI) is on it
    rep = ncu.load_actions(H42 / "ncu" / "divmod-modulo-sourcecounters.ncu-rep")[0]
    model = ncu_source.line_model(rep)
    assert model is not None and model.samples == 12439 and model.hottest is not None
    hot = model.hottest
    assert hot.line == 22 and model.sample_share(hot) == pytest.approx(8176 / 12439)
    assert {"I2F", "MUFU.RCP", "IMAD.HI"} <= set(hot.opcodes)
    # the weight the static model gives a PTX division: the loop's 104 SASS instructions for the PTX's 8 rem.s32
    in_loop = [r for r in ncu_source.sass_rows(rep) if r["line"] == 22 and r["inst_executed"] == 524416]
    assert len(in_loop) == 8 * lines.PTX_DIVISION_SASS
    assert (H42 / "compiled" / "divmod-modulo" / "window_kernel.ptx").read_text().count("rem.s32") == 8
    # before: "uncoalesced global loads 7.8 of 32 bytes, est. 75.7%" first (false: its twin got it too)
    bare = op.diagnose(evidence("annotation", "divmod-modulo", None))
    assert bare[0].metric == "window.global_ld_bytes_per_sector" and bare[0].gain_pct == pytest.approx(75.7, abs=0.1)
    found = sorted(op.diagnose(evidence("annotation", "divmod-modulo", model)), key=lambda o: -o.gain_pct)
    first = found[0]
    assert first.metric == "window.stall_not_selected" and "the line is integer division or modulo" in first.name
    assert first.change is not None and first.change.startswith("make the divisor a tl.constexpr")
    assert "carried in window by _common.py:22 (65% of its samples; ISETP x14159232 (integer ALU)" in first.change
    # the loads' item keeps only the time warps waited on memory (6% of the samples), naming the load line
    loads = next(o for o in found if o.metric == "window.global_ld_bytes_per_sector")
    assert loads.gain_pct < 7.0 and "_common.py:25 (LDG x4195328)" in (loads.change or "")


def test_without_lines_a_busy_special_function_pipe_still_sets_the_stall_change() -> None:
    # sfu per_term in annotation mode (no source counters then): mio_throttle was named with a change about shared
    # memory while its own evidence had the special-function pipe 79% busy, the busiest; since issue 51 the pipe is
    # an item of its own (its time, 78.6% of the stage's), and no stall item says it again
    found = op.diagnose(evidence("annotation", "sfu-per_term", None))
    xu = max(found, key=lambda o: o.gain_pct)
    assert xu.metric == "expsum.xu_pipe_pct" and xu.name.endswith("at 79% of its peak in expsum, the busiest unit")
    assert xu.change is not None and xu.change.startswith("take the special functions out of expsum's loop")
    assert not any(o.metric == "expsum.stall_mio_throttle" for o in found)
    # divmod modulo's busiest pipe is the integer ALU (71%): its stall items keep their own changes
    div = op.diagnose(evidence("annotation", "divmod-modulo", None))
    assert not any("special-function" in (o.change or "") for o in div)
