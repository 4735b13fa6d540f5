"""`kbench runs`: run folders made by real analyses of committed H100 captures, plus a failed, a still-running and an
unreadable one, listed newest first as a table and as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kbench.report import folder
from kbench.report.runs import runs
from tests.conftest import DATA, Ran


def test_runs_lists_every_folder_newest_first_with_its_status(
    cli: Callable[..., Ran], tmp_path: Path, isolated: Path
) -> None:
    root = tmp_path / "profiles"
    for capture, plan in [("annotation_matmul_base.ncu-rep", "matmul"), ("nsys_fork_join.sqlite", "fork_join")]:
        done = cli("analyze", str(DATA / "kbench_h100" / capture), "--plan", plan, "--out", str(root))
        assert done.returncode == 0, done.stderr
    failed = folder.new_run_dir(root, "event", "matmul", "m=1", now=None)
    params = {"kernel": "matmul", "version": "base", "mode": "event", "params": {"m": 1}, "status": "running"}
    folder.mark_failed(failed, params, RuntimeError("CUDA error: out of memory"))
    running = root / "event" / "vector_add" / "n=1" / "20300101T000000Z"
    running.mkdir(parents=True)
    (running / folder.PARAMS).write_text(json.dumps({**params, "kernel": "vector_add", "status": "running"}))
    broken = root / "ncu" / "tiny" / "n=2" / "20000101T000000Z"
    broken.mkdir(parents=True)
    (broken / folder.PARAMS).write_text("{not json")

    rows = runs(root)
    assert [r.started for r in rows] == sorted((r.started for r in rows), reverse=True)
    assert rows[0].status == "running" and rows[0].kernel == "vector_add" and rows[0].started == "2030-01-01T00:00:00Z"
    assert rows[-1].status == "unreadable" and rows[-1].mode == "ncu" and rows[-1].kernel == "tiny"
    failed_row = next(r for r in rows if r.mode == "event" and r.kernel == "matmul")
    assert failed_row.status == "failed" and failed_row.error == "RuntimeError: CUDA error: out of memory"
    assert failed_row.duration_us is None and failed_row.bottleneck is None
    ok = [r for r in rows if r.status == "ok"]
    assert {(r.mode, r.kernel) for r in ok} == {("annotation", "matmul"), ("nsys", "fork_join")}
    for r in ok:  # the figures are the analysed report's
        written = json.loads((Path(r.path) / folder.RESULT).read_text())
        assert r.duration_us == (written["plan_timing"] or {}).get("median_us", written["figures"]["total_us"])
        assert r.bottleneck == written["figures"]["bottleneck"] and r.version != "n/a"

    shown = cli("runs", "--out", str(root))
    assert shown.returncode == 0
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("started (UTC)") and len(lines) == 1 + len(rows)
    assert "running" in lines[1] and "unreadable" in lines[-1]
    as_json = cli("runs", "matmul", "--out", str(root), "--json")
    listed = json.loads(as_json.stdout)
    assert {r["kernel"] for r in listed} == {"matmul"} and len(listed) == 2
    assert len(json.loads(cli("runs", "--out", str(root), "--json", "--limit", "1").stdout)) == 1
    none = cli("runs", "--out", str(tmp_path / "nothing"))
    assert none.returncode == 0 and "no runs under" in none.stderr
