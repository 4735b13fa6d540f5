"""tests/benchmark/diagnosis_table.py on pairs laid out as issue 42's captures are (tests/data/issue42_h100/<mode>/
<run>, listed in its pairs.json): real H100 runs linked into such a folder give the same row as under their own
name; a pair whose fix realized no gain gets no ratio; a run no pair names is said."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import test_diagnosis
from tests.benchmark import diagnosis_table as table
from tests.conftest import DATA


@pytest.fixture
def issue42(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    folder = data / table.ISSUE42
    folder.mkdir(parents=True)
    for mode in ("event", "annotation"):  # issue42_h100's layout: <mode>/<run>
        (folder / mode).mkdir()
        for run in ("ilp-serial", "ilp-parallel", "stream-few"):
            (folder / mode / run).symlink_to(DATA / "validation_h100_1125" / run / mode)
    (folder / "pairs.json").write_text('[["ilp-serial", "ilp-parallel"], ["ilp-parallel", "ilp-serial"]]')
    monkeypatch.setattr(table, "DATA", data)
    monkeypatch.setattr(test_diagnosis, "DATA", data)
    monkeypatch.setattr(table, "PAIRS", [])
    return folder


def test_issue42_pairs_are_read_from_pairs_json(issue42: Path, tmp_path: Path) -> None:
    assert table.pairs() == [
        ("issue42_h100/ilp-serial", "issue42_h100/ilp-parallel"),
        ("issue42_h100/ilp-parallel", "issue42_h100/ilp-serial"),
    ]
    rows = table.rows(tmp_path)
    assert rows[0].startswith(
        "| issue42_h100/ilp-serial -> ilp-parallel | event | Too few warps to hide arithmetic latency in poly"
    )
    assert rows[0].endswith("| 85.1% | 83.7% | 1.02 | 0.0 |")  # as docs/diagnosis.md has it under h100_1125/
    reversed_event = next(r for r in rows if r.startswith("| issue42_h100/ilp-parallel -> ilp-serial | event"))
    assert reversed_event.endswith("| n/a (no gain realized) | 8.8 |")
    assert table.unpaired(table.pairs()) == ["stream-few"]


def test_a_pair_that_cannot_be_analysed_gets_a_row_that_says_why(issue42: Path, tmp_path: Path) -> None:
    (issue42 / "event" / "broken").mkdir()
    row = table.row("issue42_h100/broken", "issue42_h100/ilp-serial", "event", tmp_path)
    assert row.startswith("| issue42_h100/broken -> ilp-serial | event | (not analysed: FileNotFoundError")
    assert row.endswith("| n/a | n/a | n/a | n/a |")
