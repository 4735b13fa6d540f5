"""An nsys SQLite export is read one way (issue 50): every query kbench makes of it goes through one guarded open
(read-only, tables only, values and steps bounded, a signal during a query raised), and the file opened is the file
named, whatever characters its name holds."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import threading
from pathlib import Path

import pytest

from kbench.analysis import timeline as tl
from kbench.errors import ConfigError, Terminated
from kbench.signals import terminate_raises
from tests.conftest import DATA
from tests.faults.helpers import kbench

NSYS = DATA / "timeline_h100" / "timeline.sqlite"  # 1314 rows, made on an H100
FORK_JOIN = DATA / "kbench_h100" / "nsys_fork_join.sqlite"  # 8538 rows


def _export_with(tmp_path: Path, *statements: str) -> Path:
    """A copy of the real export changed by ``statements``."""
    path = tmp_path / "timeline.sqlite"
    shutil.copy(NSYS, path)
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()
    return path


ENDLESS_GPU = (
    "drop table TARGET_INFO_GPU",
    "create view TARGET_INFO_GPU as with recursive c(id) as (select 1 union all select id + 1 from c) "
    "select id, 'NVIDIA H100 80GB HBM3' as name from c where id < 0",
)


@pytest.mark.slow
def test_a_recursive_view_where_the_device_table_belongs_is_not_run(tmp_path: Path) -> None:
    # the review's file: device_name queried TARGET_INFO_GPU without the guards, spun at 97% CPU and ignored SIGTERM;
    # now the view is refused and the report names the device unknown (the timeout only stops the old code)
    path = _export_with(tmp_path, *ENDLESS_GPU)
    assert tl.device_name(NSYS) == "NVIDIA H100 80GB HBM3"
    done = kbench("analyze", str(path), "--out", str(tmp_path / "out"), timeout=90)
    assert done.code == 0, done.stderr
    report = next((tmp_path / "out").rglob("report.md")).read_text()
    assert "- Device: unknown device (not in conf/devices.json)" in report


@pytest.mark.parametrize(
    "view",
    [
        "select 0 as id, 'NVIDIA H100 80GB HBM3' as name",  # a view of one row is a view: not read either
        "select id, name from t",  # the real table renamed, behind a view
    ],
)
def test_the_device_is_read_from_a_table_only(view: str, tmp_path: Path) -> None:
    path = _export_with(tmp_path, "alter table TARGET_INFO_GPU rename to t", f"create view TARGET_INFO_GPU as {view}")
    assert tl.device_name(path) is None
    assert len(tl.load(path)) == len(tl.load(NSYS))  # the rest of the export reads as before


@pytest.mark.parametrize(
    "name",
    ["NVIDIA H100\n# Heading", "x" * 201],
    ids=["two-lines", "too-long"],
)
def test_a_device_name_that_is_not_one_short_line_is_not_used(name: str, tmp_path: Path) -> None:
    path = _export_with(tmp_path, f"update TARGET_INFO_GPU set name = '{name}'")
    assert tl.device_name(path) is None


def test_a_query_past_its_budget_of_steps_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # the backstop behind tables-only: every query's steps are counted; a small budget makes the real export too dear
    monkeypatch.setattr(tl, "SQLITE_STEPS_FLOOR", 20_000)  # the real export's queries take 73,000
    monkeypatch.setattr(tl, "SQLITE_STEPS_PER_BYTE", 0)
    with pytest.raises(ConfigError, match=r"is not a readable nsys SQLite export: a query ran past [\d,]+ steps"):
        tl.load(FORK_JOIN)


def test_a_signal_during_a_query_ends_it_as_that_signal(monkeypatch: pytest.MonkeyPatch) -> None:
    # SQLite runs a query in C: a Python signal handler (kbench's SIGTERM -> Terminated) runs only where SQLite calls
    # back, and an exception raised there SQLite would swallow; it ends the query and is raised again
    monkeypatch.setattr(tl, "SQLITE_STEPS_FLOOR", 10**15)  # no budget: only the signal ends this query
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    with terminate_raises(), pytest.raises(Terminated, match="SIGTERM"), tl._open_export(NSYS) as db:
        timer.start()
        try:
            db.execute("select count(*) from StringIds a, StringIds b, StringIds c, StringIds d").fetchone()
        finally:
            timer.cancel()


@pytest.mark.parametrize("name", ["%2e%2e", "a?mode=rw", "b#c", "%25"])
def test_the_export_opened_is_the_file_named(name: str, tmp_path: Path) -> None:
    # SQLite's URI parser decodes %2e%2e to "..": a folder named so (checked by a fence under its literal name) opened
    # the export beside its parent; "?" and "#" began the URI's options and fragment
    folder = tmp_path / "inner" / name
    folder.mkdir(parents=True)
    shutil.copy(NSYS, folder / "t.sqlite")
    shutil.copy(FORK_JOIN, tmp_path / "t.sqlite")  # what "inner/%2e%2e/t.sqlite" decodes to
    assert len(tl.load(folder / "t.sqlite")) == len(tl.load(NSYS))
    assert tl.device_name(folder / "t.sqlite") == "NVIDIA H100 80GB HBM3"
