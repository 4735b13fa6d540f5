"""Proton mode's reading side on profiles captured on an H100 (tests/data/proton_h100, README there): Triton's
viewer reads the hatchet tree; each scope is a stage; the report is the contract's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kbench import pipeline
from kbench.analysis import proton as pa
from kbench.errors import KbenchError
from kbench.plan.discovery import load_version
from kbench.report.mode_sections import ModeSections
from kbench.report.models import read_result
from tests.conftest import DATA, contract_problems

PROTON = DATA / "proton_h100"
POINT = {"b": 32, "s": 1, "t": 8192}  # where mla_v3.hatchet was captured


def test_scopes_are_the_stages_with_proton_s_sums() -> None:
    profile = pa.load(PROTON / "mla_v3.hatchet")
    assert [s.name for s in profile.scopes] == ["combine", "partial"]
    partial = profile.scope("partial")
    assert partial is not None and partial.repetitions == 5
    assert partial.kernels == {"mla_v3_partial_kernel": (5, 551435.0)}
    assert partial.mean_us == pytest.approx(110.287)  # event mode measured 109.3 us at the same point
    assert partial.metrics["bytes"] == pytest.approx(5 * 310984704.0)  # the scope's metrics are summed too
    assert profile.device["num_sms"] == 132 and profile.device["arch"] == "90"
    assert "mla_v3_partial_kernel" in profile.tree and "\x1b[" not in profile.tree


def test_a_pc_sampling_profile_keeps_its_kernel_time() -> None:
    mm = pa.load(PROTON / "matmul_pcs.hatchet").scope("mm")
    assert mm is not None and mm.repetitions == 3 and mm.mean_us == pytest.approx(30.049)


def test_overhead_is_the_session_s_extra_time() -> None:
    # overhead.json: 200 repetitions of mla_decode v3's two stages, GPU us, three times outside and inside Proton
    loops = json.loads((PROTON / "overhead.json").read_text())
    steady = [
        pa.overhead_pct(plain[0], on[0]) for plain, on in zip(loops["plain"][1:], loops["proton"][1:], strict=True)
    ]
    assert all(abs(pct) < 15.0 for pct in steady)  # 23.79/23.80 ms inside against 26.58/23.81 ms outside
    assert pa.overhead_pct(loops["plain"][0][0], loops["proton"][0][0]) > 100.0  # the session's start-up


@pytest.mark.parametrize("text", ["{}", "[1, 2]", "not json"])
def test_a_file_that_is_not_a_proton_profile_is_one_line(text: str, tmp_path: Path) -> None:
    bad = tmp_path / "x.hatchet"
    bad.write_text(text)
    with pytest.raises(KbenchError, match=r"x.hatchet(:| is) not a (readable )?Proton profile"):
        pa.load(bad)


def test_the_report_of_a_proton_profile_follows_the_contract(isolated: Path) -> None:
    capture = isolated / "run" / "proton.hatchet"
    capture.parent.mkdir()
    shutil.copy(PROTON / "mla_v3.hatchet", capture)
    loops = {"reps": 100, "stages": {"partial": {"plain_us": 11000.0, "profiled_us": 11110.0}}}  # made up: the note
    (capture.parent / "proton.json").write_text(json.dumps(loops))
    plan = load_version("mla_decode", "v3").from_values(POINT)
    made = {
        "kernel": "mla_decode",
        "version": "v3",
        "params": plan.values(),
        "device": {"name": "NVIDIA H100 80GB HBM3"},
    }
    (capture.parent / "params.json").write_text(json.dumps(made))  # as a proton-mode run folder has it
    r = pipeline.analyze(capture, None, Path("prof"), plan)
    run = Path(r.out_dir)
    assert contract_problems(run / "report.md") == []
    assert {s.name: round(s.duration_us, 3) for s in r.stages} == {"partial": 110.287, "combine": 4.877}
    assert r.timing_method.startswith("Proton (Triton's profiler, CUPTI backend") and "5 per kernel" in r.timing_method
    assert any("Proton's overhead on partial: +1.0%" in n for n in r.notes)
    assert "mla_v3_combine_kernel" in (run / "proton-tree.txt").read_text()


def test_a_plan_whose_stages_the_profile_lacks_is_one_line(isolated: Path) -> None:
    plan = load_version("mla_decode", "v2").from_values(POINT)  # one stage, "attention"
    with pytest.raises(KbenchError, match=r"no kernel time in a scope named attention \(scopes: combine, partial\)"):
        pipeline.analyze(PROTON / "mla_v3.hatchet", None, Path("prof"), plan)
    with pytest.raises(KbenchError, match="a Proton profile is read against its plan"):
        pipeline.analyze(PROTON / "mla_v3.hatchet", None, Path("prof"), None)


def test_pc_samples_per_line_match_the_profile_s_nodes() -> None:
    mm = pa.load(PROTON / "matmul_pcs.hatchet").scope("mm")
    assert mm is not None
    raw = json.loads((PROTON / "matmul_pcs.hatchet").read_text())[0]["children"][0]["children"][0]["children"]
    assert len(mm.lines) == len(raw) == 17
    assert sum(x.samples for x in mm.lines) == sum(n["metrics"]["num_samples"] for n in raw)
    top = max(mm.lines, key=lambda x: x.samples)
    node = next(n for n in raw if n["frame"]["name"] == f"{top.where}@{top.kernel}")
    assert (top.samples, top.stalled) == (node["metrics"]["num_samples"], node["metrics"]["num_stalled_samples"])
    assert top.reasons["dispatch_stall"] == node["metrics"]["stalled_dispatch_stall"]
    stalls = mm.stalls()
    assert next(iter(stalls)) == "dispatch_stall" and stalls["dispatch_stall"] == sum(
        n["metrics"]["stalled_dispatch_stall"] for n in raw
    )


def test_a_pc_sampling_report_shows_lines_and_stalls(isolated: Path) -> None:
    capture = isolated / "run" / "proton.hatchet"
    capture.parent.mkdir()
    shutil.copy(PROTON / "matmul_pcs.hatchet", capture)
    plan = load_version("matmul", "base").from_values({"m": 2048, "n": 2048, "k": 2048})
    (capture.parent / "params.json").write_text(
        json.dumps({"kernel": "matmul", "params": plan.values(), "device": {"name": "NVIDIA H100 80GB HBM3"}})
    )
    r = pipeline.analyze(capture, None, Path("prof"), plan)
    text = (Path(r.out_dir) / "report.md").read_text()
    assert contract_problems(Path(r.out_dir) / "report.md") == []
    assert "## PC sampling" in text and "| mm | 19827 |" in text and "dispatch_stall" in text
    assert "_triton.py:50 | 5850 (29.5%) | 4461 | dispatch_stall |" in text
    assert not any("no PC sampling" in n for n in r.notes)
    back = read_result(Path(r.out_dir))
    assert back is not None and isinstance(back.sections, ModeSections) and back.sections == r.sections
    # the dominant stall in the samples is a named item, with the hottest lines from the samples
    stall = [o for o in r.figures.opportunities if o.metric == "mm.stall_dispatch_stall"]
    assert stall and stall[0].named and "Stall on dispatch_stall in mm" in stall[0].name
    assert "(3591 of" in stall[0].name and "PC samples" in stall[0].name
    assert stall[0].change is not None and "_triton.py:50 (5850 samples, most dispatch_stall)" in stall[0].change


def test_samples_proton_could_not_map_to_lines_stay_on_the_kernel() -> None:
    mm = pa.load(PROTON / "matmul_v2_pcs_loaded_before.hatchet").scope("mm")
    assert mm is not None and mm.repetitions == 200
    [whole] = mm.lines
    assert whole.where == pa.WHOLE_KERNEL and whole.kernel == "mm_kernel"
    assert (whole.samples, whole.stalled) == (12161040, 8086290)
    assert next(iter(mm.stalls())) == "wait" and mm.stalls()["wait"] == 2947676
