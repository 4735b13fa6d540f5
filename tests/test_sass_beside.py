"""The SASS ncu_report gave of a capture's kernels, kept beside it (sass.json): the next analysis of that capture
reads it there instead of readying ncu_report's disassembler (0.4-0.5 s of `kbench analyze`), and writes the same
report; a sass.json made of another capture, or holding what is not one line of SASS, is not taken."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kbench.analysis import ncu_source
from kbench.modes import counters
from tests.conftest import DATA

CAPTURE = DATA / "ncu_h100" / "full_add.ncu-rep"  # ncu's full set with source counters, one kernel (H100)

ANALYZE = """
import sys
import ncu_report
calls = []
real = ncu_report.IAction.sass_by_pc
def counted(self, pc):
    calls.append(pc)
    return real(self, pc)
ncu_report.IAction.sass_by_pc = counted
from kbench.cli import entry
try:
    entry.main(["analyze", sys.argv[1], "--out", sys.argv[2]])
except SystemExit as e:
    assert not e.code, e.code
print(len(calls))
"""


def analyze(capture: Path, out: Path) -> tuple[int, Path]:
    """`kbench analyze` in its own process: how many SASS instructions it asked ncu_report for, and its run folder."""
    done = subprocess.run(
        [sys.executable, "-c", ANALYZE, str(capture), str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    [run] = [p.parent for p in out.rglob("report.md")]
    return int(done.stdout.split()[-1]), run


def top3(run: Path) -> str:
    """The Top 3 section (what the per-line model feeds: each item's lines and the opcodes executed on them)."""
    text = (run / "report.md").read_text()
    return text.split("## Top 3", 1)[1].split("\n## ", 1)[0]


@pytest.mark.slow
def test_a_second_analysis_reads_the_sass_beside_the_capture(tmp_path: Path) -> None:
    asked, first = analyze(CAPTURE, tmp_path / "a")
    assert asked > 0  # a capture from elsewhere: its SASS read from ncu_report ...
    kept = json.loads((first / counters.SASS).read_text())
    assert kept["capture_sha256"] == counters.digest(first / CAPTURE.name) == counters.digest(CAPTURE)
    assert sum(len(t) for t in kept["kernels"].values()) == asked  # ... and kept, every instruction once
    again, second = analyze(first / CAPTURE.name, tmp_path / "b")
    assert again == 0
    assert top3(second) == top3(first) and "FADD x" in top3(first)


def test_sass_of_another_capture_or_not_sass_is_not_taken(tmp_path: Path) -> None:
    shutil.copy(CAPTURE, tmp_path / CAPTURE.name)
    sha = counters.digest(CAPTURE)
    record = ncu_source.sass_record("0" * 64, {0: {"0x10": "FADD R1, R2, R3"}})
    assert ncu_source.sass_table(record, sha) == {}
    mixed = {
        "capture_sha256": sha,
        "kernels": {
            "0": {"0x10": "FADD R1, R2, R3", "0x20": "FADD\n## heading", "pc": "NOP", "0x30": 7, "0x40": "`x`"},
            "x": {"0x10": "NOP"},
            "1": "not a table",
        },
    }
    assert ncu_source.sass_table(mixed, sha) == {0: {"0x10": "FADD R1, R2, R3"}}
    (tmp_path / counters.SASS).write_text(json.dumps(ncu_source.sass_record("f" * 64, {0: {"0x10": "NOP"}})))
    asked, _ = analyze(tmp_path / CAPTURE.name, tmp_path / "out")
    assert asked > 0  # the stale file was not believed


@pytest.mark.parametrize("known", [None, {}])
def test_sass_rows_read_ncu_report_once_per_instruction(known: dict[str, str] | None) -> None:
    from kbench.analysis import ncu

    [action] = ncu.load_actions(CAPTURE)
    rows = ncu_source.sass_rows(action, known=known)
    if known is not None:
        assert known == {r["pc"]: r["sass"] for r in rows}
        assert ncu_source.sass_rows(action, known=known) == rows
    assert all(r["sass"] for r in rows)


def test_a_planted_sass_json_never_ends_an_analysis_nor_reaches_a_report(tmp_path: Path) -> None:
    """A sass.json made for this very capture (its digest) but holding a non-ASCII digit or a 5,000-digit number as a
    kernel index (int() refused them: exit 70) or markup as the instructions (their first word reached
    source/<kernel>.md): those indexes are passed over, and what reaches a report is an opcode's name or '?'."""
    from kbench.analysis import ncu, opcodes

    capture = tmp_path / CAPTURE.name
    shutil.copy(CAPTURE, capture)
    planted = "<img_src=x_onerror=alert(1)>|**INJ**|[click](http://evil.example)|#H R1, R2"
    [action] = ncu.load_actions(CAPTURE)
    table = {row["pc"]: planted for row in ncu_source.sass_rows(action, with_sass=False)}
    kernels = {"\u00b2": {}, "9" * 5000: {}, "0": table}
    record = {"capture_sha256": counters.digest(capture), "kernels": kernels}
    (tmp_path / counters.SASS).write_text(json.dumps(record))
    asked, run = analyze(capture, tmp_path / "out")
    assert asked == 0  # the planted table was taken (it names every instruction) ...
    written = "\n".join(p.read_text() for p in run.rglob("*.md"))
    assert "<img" not in written and "**INJ**" not in written and "evil.example" not in written
    assert opcodes.sass_opcode(planted) == "?"  # ... and shows nothing of it but '?'
