"""`kbench runs`: run folders made by real analyses of committed H100 captures, plus a failed, a still-running and an
unreadable one, listed newest first as a table and as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kbench.report import folder
from kbench.report.runs import runs
from tests.conftest import DATA, Ran


@pytest.mark.slow
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
    (tmp_path / "nothing").mkdir()  # a root with no run in it (one that is not there is bad input: tests/test_cli.py)
    none = cli("runs", "--out", str(tmp_path / "nothing"))
    assert none.returncode == 0 and "no runs under" in none.stderr


@pytest.mark.slow
def test_compare_two_runs_and_a_run_with_its_previous(cli: Callable[..., Ran], tmp_path: Path, isolated: Path) -> None:
    root = tmp_path / "profiles"
    base, v2 = DATA / "kbench_h100" / "annotation_matmul_base.ncu-rep", DATA / "kbench_h100" / "nsys_fork_join.sqlite"
    for _ in range(2):  # the same capture twice: every change is 0 and within noise where samples allow
        assert cli("analyze", str(base), "--plan", "matmul", "--out", str(root)).returncode == 0
    assert cli("analyze", str(v2), "--plan", "fork_join", "--out", str(root)).returncode == 0
    rows = runs(root)
    mm = [r for r in rows if r.kernel == "matmul"]
    fj = next(r for r in rows if r.kernel == "fork_join")

    same = cli("compare", mm[1].path, mm[0].path, "--format", "json")
    assert same.returncode == 0, same.stderr
    got = json.loads(same.stdout)
    assert got["rows"][0]["metric"] == "Duration (us)" and got["rows"][0]["change"].startswith("+0.0%")
    assert got["notes"] == [
        "source: n/a: neither run recorded the source that ran",
        "the plan's duration is the sum of its stage medians (one run has no whole-plan measurement)",
    ]
    assert got["source_changed"] is None  # analyses of captures from before kbench recorded the source
    prev = cli("compare", mm[0].path, "--previous")
    assert prev.returncode == 0 and f"A: `{mm[1].path}`" in prev.stdout and "| Duration (us) |" in prev.stdout

    across = json.loads(cli("compare", mm[0].path, fj.path, "--format", "json").stdout)
    notes = " / ".join(across["notes"])
    assert "different kernels (matmul, fork_join)" in notes and "different modes (annotation, nsys)" in notes
    stages = [
        {s["name"] for s in json.loads((Path(r.path) / folder.RESULT).read_text())["figures"]["stages"]}
        for r in (mm[0], fj)
    ]
    common = sorted(stages[0] & stages[1])
    assert "only in" in notes and common  # both plans have a stage named mm
    expected = [[f"{s} duration (us)", f"{s} roofline efficiency (%)"] for s in common]
    assert [r["metric"] for r in across["rows"]] == ["Duration (us)", *(m for pair in expected for m in pair)]

    for args, fragment in [
        ((mm[0].path,), "give two run folders, or one and --previous"),
        ((mm[0].path, mm[1].path, "--previous"), "give two run folders, or one and --previous"),
        ((str(tmp_path), mm[0].path), "has no result.json"),
        ((mm[1].path, "--previous"), "no earlier finished run"),
        ((mm[0].path, mm[1].path, "--format", "xml"), "--format=xml"),
    ]:
        bad = cli("compare", *args)
        assert bad.returncode == 2 and fragment in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_devlog_appends_entries_with_vs_previous_and_never_rewrites(
    cli: Callable[..., Ran], tmp_path: Path, isolated: Path
) -> None:
    from kbench.report.devlog import MARK

    root, docs = tmp_path / "profiles", tmp_path / "kernels"
    ann = DATA / "kbench_h100" / "annotation_matmul_base.ncu-rep"
    assert cli("analyze", str(ann), "--plan", "matmul", "--out", str(root)).returncode == 0
    first = runs(root)[0]
    done = cli("devlog", first.path, "--docs", str(docs), "--insight", "grouped order next", "--insight", "two")
    assert done.returncode == 0, done.stderr
    log = docs / "matmul.md"
    text = log.read_text()
    assert text.startswith("# matmul: development log") and "- grouped order next\n- two\n" in text
    assert "vs Previous: no earlier entry with these parameters" in text
    assert f"| Duration | {first.duration_us:.2f} μs | -- |" in text
    assert "**Bottleneck**: Compute" in text

    # the same capture analysed again: the next entry compares with the first (same mode and parameters)
    assert cli("analyze", str(ann), "--plan", "matmul", "--out", str(root)).returncode == 0
    second = runs(root)[0]
    assert cli("devlog", second.path, "--docs", str(docs)).returncode == 0
    grown = log.read_text()
    assert grown.startswith(text)  # earlier entries untouched
    added = grown[len(text) :]
    assert f"vs Previous: vs base (`{first.path}`)" in added and "| Duration | " in added
    assert "0.0% faster" in added and "| TC Util | 76% | +0.0 pp |" in added
    assert len(MARK.findall(grown)) == 2

    # another mode's entry, or other parameters, are not a previous entry
    from kbench.report.devlog import previous_entry

    params = {"dtype": "bfloat16", "k": 4096, "m": 4096, "n": 4096}
    assert previous_entry(grown, "annotation", params)["run"] == second.path  # type: ignore[index]
    assert previous_entry(grown, "ncu", params) is None
    assert previous_entry(grown, "annotation", {**params, "m": 1}) is None
    bad = cli("devlog", str(tmp_path), "--docs", str(docs))
    assert bad.returncode == 2 and "has no result.json" in bad.stderr


ROOT = Path(__file__).parents[1]


def test_runs_finds_committed_and_renamed_run_folders_and_nothing_inside_them() -> None:
    from kbench.report.runs import run_dirs, runs

    mla = ROOT / "docs" / "examples" / "mla_decode-h100-runs"
    named = sorted(d.name for d in run_dirs(mla))
    assert named == sorted(d.name for d in mla.iterdir() if (d / "params.json").is_file()) and len(named) >= 8
    every = runs(ROOT / "docs" / "examples")
    assert all(r.status != "unreadable" for r in every)
    assert not [r for r in every if "/tiling/" in r.path or r.path.endswith("/tiling")]
    assert not [r for r in every if "h100" in r.kernel or "h100" in r.mode]  # folder names read as kernel or mode


def test_the_runs_table_keeps_its_columns_apart_and_help_names_every_status(cli) -> None:
    from kbench.report.runs import STATUSES, runs, table

    rows = runs(ROOT / "docs" / "examples")
    lines = table(rows).splitlines()
    head = lines[0]
    starts = [head.index(h) for h in ("mode", "kernel", "version", "duration us", "bottleneck", "status", "params")]
    for line, r in zip(lines[1:], rows, strict=True):
        for at in starts:
            assert line[at - 2 : at] == "  " or line[at - 2 : at].endswith(" "), (line, r.path)
    helped = cli("runs", "--help")
    text = " ".join(helped.stdout.split())
    for status in STATUSES:
        assert f"{status} (" in text, status


def test_compare_previous_takes_the_same_parameters(cli) -> None:
    mla = ROOT / "docs" / "examples" / "mla_decode-h100-runs"
    done = cli("compare", str(mla / "v3-s1"), "--previous", "--format", "json")
    assert done.returncode == 0, done.stderr
    cmp = json.loads(done.stdout)
    a, b = (json.loads((mla / Path(x).name / "params.json").read_text()) for x in (cmp["a"], cmp["b"]))
    assert a["params"] == b["params"] and a["mode"] == b["mode"] and a["started_at"] < b["started_at"]


def test_a_result_json_naming_a_kernel_kbench_would_not_is_one_row_not_the_end_of_the_listing(
    cli: Callable[..., Ran], tmp_path: Path
) -> None:
    """An altered result.json (a path for a kernel name) is refused wherever it is read as a run's result (compare,
    devlog: exit 2), but `kbench runs` lists its folder as a row without it, the other runs still listed."""
    src = DATA / "examples_h100_1122" / "event-vector_add-v2"
    good, bad = tmp_path / "out" / "good", tmp_path / "out" / "bad"
    for run in (good, bad):
        run.mkdir(parents=True)
        for name in ("params.json", "result.json"):
            (run / name).write_text((src / name).read_text())
    altered = json.loads((bad / "result.json").read_text())
    (bad / "result.json").write_text(json.dumps({**altered, "kernel": "../elsewhere"}))
    listed = cli("runs", "--out", str(tmp_path / "out"), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {Path(r["path"]).name: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"good", "bad"}
    assert rows["good"]["duration_us"] is not None and rows["bad"]["duration_us"] is None
    assert cli("compare", str(good), str(bad)).returncode == 2


def _copy(run: Path, to: Path, device: str | None = None, known: bool = True) -> Path:
    """A real run folder (params.json, result.json) copied to ``to``, its recorded device renamed to ``device``
    where given, as a run on the CPU records it (capture.gpu.target_device: the table's display name), or, not
    ``known``, as resolve() records a part the table does not hold (no key)."""
    import shutil

    shutil.copytree(run, to)
    if device is not None:
        result, params = (json.loads((to / name).read_text()) for name in (folder.RESULT, folder.PARAMS))
        result["device"] = params["device"]["name"] = device
        if not known:
            result["device_key"] = params["device"]["key"] = None
        for name, data in ((folder.RESULT, result), (folder.PARAMS, params)):
            (to / name).write_text(json.dumps(data))
    return to


def test_runs_name_one_chip_one_way(tmp_path: Path) -> None:
    # issue 50: "NVIDIA H100 80GB HBM3" (NVML, GPU runs) and "NVIDIA H100 SXM5 80GB" (conf/devices.json, runs on
    # the CPU) listed one H100 under two names; each is now the table's name, NVML's kept beside it
    h100, h200 = DATA / "validation_h100_1127" / "splitk-serial_combine", DATA / "validation_h200" / "tail-after"
    root = tmp_path / "runs"
    gpu = _copy(h100 / "event", root / "gpu")
    cpu = _copy(h100 / "annotation", root / "cpu", device="NVIDIA H100 SXM5 80GB")
    params_only = _copy(h100 / "event", root / "params-only")
    (params_only / folder.RESULT).unlink()  # a failed run: params.json's {"name", "key"} is all there is
    other = _copy(h200 / "event", root / "h200")
    cut = _copy(h100 / "event", root / "cut", device="NVIDIA H100 80GB HBM3 (114 SMs, not 132)", known=False)
    rows = runs(root)
    assert {r.device for r in rows if Path(r.path) in (gpu, cpu, params_only)} == {"NVIDIA H100 SXM5 80GB"}
    shown = {Path(r.path).name: (r.device, r.device_reported) for r in rows}
    assert shown == {
        gpu.name: ("NVIDIA H100 SXM5 80GB", "NVIDIA H100 80GB HBM3"),
        cpu.name: ("NVIDIA H100 SXM5 80GB", None),
        params_only.name: ("NVIDIA H100 SXM5 80GB", "NVIDIA H100 80GB HBM3"),
        other.name: ("NVIDIA H200 SXM 141GB", "NVIDIA H200"),
        cut.name: ("NVIDIA H100 80GB HBM3 (114 SMs, not 132)", None),  # not the table's part: as recorded
    }


def test_runs_list_every_folder_when_the_device_table_is_malformed(tmp_path: Path, monkeypatch) -> None:
    bad = tmp_path / "devices.json"
    bad.write_text("{not json")
    monkeypatch.setenv("KBENCH_DEVICES", str(bad))
    run = _copy(DATA / "validation_h200" / "tail-after" / "event", tmp_path / "runs" / "h200")
    (row,) = runs(tmp_path / "runs")
    assert row.path == str(run) and (row.device, row.device_reported) == ("NVIDIA H200", None)


def test_compare_of_one_chip_under_its_two_names_notes_no_other_device(cli, tmp_path: Path) -> None:
    h100, h200 = DATA / "validation_h100_1127" / "splitk-serial_combine", DATA / "validation_h200" / "tail-after"
    gpu = _copy(h100 / "event", tmp_path / "gpu")
    cpu = _copy(h100 / "event", tmp_path / "cpu", device="NVIDIA H100 SXM5 80GB")
    other = _copy(h200 / "event", tmp_path / "h200")
    same = cli("compare", str(gpu), str(cpu), "--format", "json")
    assert same.returncode == 0, same.stderr
    assert "different devices" not in same.stdout
    differ = cli("compare", str(gpu), str(other), "--format", "json")
    assert "different devices (NVIDIA H100 SXM5 80GB, NVIDIA H200 SXM 141GB)" in differ.stdout
