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


REPORTS = ex.reports()


def test_there_are_reports_to_check() -> None:
    assert len(REPORTS) >= 200
    assert sum(ex.misquoted(r)[1] for r in REPORTS) >= 50  # quotes checked against a file of this repository


@pytest.mark.parametrize("report", REPORTS, ids=[str(r.relative_to(ex.ROOT)) for r in REPORTS])
def test_every_quoted_source_line_holds_the_quoted_text(report: Path) -> None:
    # a report's `file:line `code`` names the line of the repository's file that holds that code (docs/examples/
    # README.md names the reports whose references were moved to today's line by hand)
    assert ex.misquoted(report)[0] == []


@pytest.mark.parametrize("report", REPORTS, ids=[str(r.relative_to(ex.ROOT)) for r in REPORTS])
def test_a_stages_times_agree_or_the_report_says_why(report: Path) -> None:
    assert ex.disagreeing(report.read_text()) == []


def test_the_checks_see_a_wrong_line_and_an_unexplained_time(tmp_path: Path) -> None:
    v8 = ex.ROOT / "src" / "kbench" / "kernel" / "mla_decode" / "v8.py"
    line = next(i for i, x in enumerate(v8.read_text().splitlines(), 1) if "mbarrier.wait(bars.index(X_SUM)" in x)
    quote = f"v8.py:{line} `mbarrier.wait(bars.index(X_SUM), j & 1)`"
    report = tmp_path / "report.md"
    report.write_text(f"# Profile: mla_decode v8\n\ncarried by {quote}\n")
    assert ex.misquoted(report) == ([], 1)
    report.write_text(f"# Profile: mla_decode v8\n\ncarried by {quote.replace(f':{line}', f':{line - 1}')}\n")
    assert ex.misquoted(report)[0] == [
        f"v8.py:{line - 1} `mbarrier.wait(bars.index(X_SUM), j & 1)`: the line does not hold it (it is at [{line}])"
    ]
    text = (ex.EXAMPLES / "issue43-h100" / "event-mla_decode-v6-s1" / "report.md").read_text()
    cut = text.split(ex.KERNEL_TIMES, 1)[0] + "\n\n" + text.split(ex.KERNEL_TIMES, 1)[1].split("\n\n", 1)[1]
    assert ex.disagreeing(cut) == [
        "partial: the Kernels table sums 107.87 us against the 104.87 us Duration",
        "combine: the Kernels table sums 2.66 us against the 5.15 us Duration",
    ]
    assert ex.disagreeing(text.replace("against 5.15 us of kernels", "against 2.66 us of kernels")) == [
        "combine: 2.66 us quoted as its kernels' time against the 5.15 us Duration"
    ]
