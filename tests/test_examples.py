"""The committed examples cannot drift from the code: every capture in docs/examples is analysed again by today's
code and each section of that report is in the committed report.md line for line (tests/example_reports.py says
which sections and why), and each picture it draws is beside it; every example report has its report.json beside
it (MCP read_report(format=json) and programs read it), and follows the contract."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests import example_reports as ex

CAPTURES = ex.captures()


def test_there_are_captures_to_check() -> None:
    assert len(CAPTURES) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("capture", CAPTURES, ids=[str(c.relative_to(ex.EXAMPLES)) for c in CAPTURES])
def test_a_committed_capture_analysed_today_gives_its_committed_report(capture: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = ex.analysed(capture, Path(tmp))
        fresh, pictures = (run / "report.md").read_text(), ex.drawn(run)
    committed = (ex.target(capture) / "report.md").read_text()
    rewrite = "run `python -m tests.example_reports --write`"
    assert ex.drift(committed, fresh) == [], rewrite
    # the pictures today's analysis draws are there: the report and its Open next name them
    assert [p for p in pictures if not (ex.target(capture) / p).is_file()] == [], rewrite


def test_the_drift_check_sees_a_changed_top_3() -> None:
    capture = next(c for c in CAPTURES if c.parent.name == "annotation-matmul-base")
    committed = (ex.target(capture) / "report.md").read_text()
    changed = committed.replace("est. ", "est. 1", 1)
    assert ex.drift(changed, committed) == ["## Top 3 Opportunities (ranked by estimated impact)"]


def test_every_example_report_has_its_report_json() -> None:
    reports = sorted(p.parent for p in ex.EXAMPLES.rglob("report.md"))
    missing = [str(r.relative_to(ex.EXAMPLES)) for r in reports if not (r / "report.json").is_file()]
    assert missing == []
