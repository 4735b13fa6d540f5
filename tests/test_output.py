"""Run folders: never reused, failures marked, earlier runs untouched."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from kbench.report import folder

NOW = datetime(2026, 11, 22, 6, 15, 2, tzinfo=timezone.utc)


def test_same_second_runs_get_sortable_distinct_folders(tmp_path: Path) -> None:
    dirs = [folder.new_run_dir(tmp_path, "event", "mla", "b32_s16_t4096_bfloat16", NOW) for _ in range(3)]
    names = [d.name for d in dirs]
    assert names == ["20261122T061502Z", "20261122T061502Z-01", "20261122T061502Z-02"]
    assert names == sorted(names)
    assert dirs[0].parent == tmp_path / "event" / "mla" / "b32_s16_t4096_bfloat16"


def test_failed_run_is_marked_and_skipped_as_baseline(tmp_path: Path) -> None:
    good = folder.new_run_dir(tmp_path, "event", "k", "p", NOW)
    (good / folder.RESULT).write_text("{}")
    (good / "report.md").write_text("# Profile: k base\n")
    bad = folder.new_run_dir(tmp_path, "event", "k", "p", NOW)
    (bad / "report.md").write_text("half")
    try:
        raise RuntimeError("stage mm failed: boom")
    except RuntimeError as e:
        folder.mark_failed(bad, {"kernel": "k", "status": "running"}, e)
    params = json.loads((bad / folder.PARAMS).read_text())
    assert params["status"] == "failed" and "boom" in params["error"]
    assert "Traceback" in (bad / folder.FAILED).read_text() and not (bad / "report.md").exists()
    third = folder.new_run_dir(tmp_path, "event", "k", "p", NOW)
    assert folder.previous_run(third) == good
    assert (good / "report.md").read_text() == "# Profile: k base\n"


def test_interrupt_is_marked_as_such(tmp_path: Path) -> None:
    run = folder.new_run_dir(tmp_path, "event", "k", "p", NOW)
    folder.mark_failed(run, {}, KeyboardInterrupt())
    assert json.loads((run / folder.PARAMS).read_text())["status"] == "interrupted"
    assert folder.previous_run(run) is None
