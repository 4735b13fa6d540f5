"""Bad input and broken files, each as a new user (or an agent) would hit them: one line, a documented exit code,
no traceback, earlier profiles untouched. Exit codes: README's table (2 bad input, 3 no GPU, 4 a malformed
configuration file or capture)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.faults.helpers import CAPTURE, earlier_run, kbench, one_line, snapshot

ROOT = Path(__file__).resolve().parents[2]
V2 = DATA / "validation_h100" / "matmul-v2" / "annotation" / "profile.ncu-rep"  # params.json beside it
K = "kbench.kernel"

CASES = [
    # (module, args, env, exit code, fragment of the one line)
    (K, ["nosuch"], {}, 2, "unknown kernel package 'nosuch'"),
    (K, ["vector_add", "nosuchversion"], {}, 2, "unknown version 'nosuchversion'"),
    (K, ["vector_add", "--n=abc"], {}, 2, "--n=abc"),
    (K, ["vector_add", "--n=0"], {}, 2, "--n=0"),
    (K, ["vector_add", "--nn=5"], {}, 2, "nn"),
    (K, ["vector_add", "--n=5", "--n=7", "--predict", "--device", "H100_SXM"], {}, 2, "--n is given twice"),
    (K, ["vector_add", "--prof_type=ncu", "--timeout=nan"], {}, 2, "--timeout=nan"),
    (K, ["vector_add", "--prof_type=ncu", "--timeout=-1"], {}, 2, "--timeout=-1"),
    (K, ["vector_add", "--prof_type=ncu", "--timeout=0"], {}, 2, "--timeout=0"),
    (K, ["vector_add", "--prof_type=ncu", "--timeout=inf"], {}, 2, "--timeout=inf"),
    (K, ["vector_add", "--out", ""], {}, 2, "--out is empty"),
    (K, ["vector_add", "--prof_type=bogus"], {}, 2, "unknown --prof_type=bogus"),
    (K, ["vector_add", "--bench-runs=0"], {}, 2, "--bench-runs"),
    (K, ["vector_add", "--cuda-graph", "--prof_type=ncu"], {}, 2, "--cuda-graph"),
    (K, ["vector_add", "--prof_type=event"], {"KBENCH_LOCK_CLOCKS": "maybe"}, 2, "KBENCH_LOCK_CLOCKS=maybe"),
    (K, ["vector_add", "--prof_type=event"], {}, 3, "needs a CUDA GPU"),
    (
        K,
        ["vector_add", "--predict", "--device", "H100_SXM"],
        {"KBENCH_DEVICES": "/nonexistent.json"},
        4,
        "cannot read device table",
    ),
    ("kbench", ["analyze", "/nonexistent.ncu-rep"], {}, 2, "no such capture file"),
    ("kbench", ["analyze", str(CAPTURE), "--mode", "foo"], {}, 2, "unknown mode foo"),
    ("kbench", ["analyze", str(ROOT / "README.md")], {}, 2, "kbench analyze reads"),
    ("kbench", ["analyze", str(CAPTURE), "--out", ""], {}, 2, "--out is empty"),
    ("kbench", ["analyze", str(CAPTURE), "extra"], {}, 2, "need --plan"),
    ("kbench", ["compare", "/nonexistent"], {}, 2, "give two run folders"),
    ("kbench", ["analyze", str(V2), "--plan", "matmul", "v2", "--m=1024"], {}, 2, "but --plan gives matmul v2"),
    ("kbench", ["analyze", str(V2), "--plan", "vector_add"], {}, 2, "was captured for matmul v2"),
    ("kbench", ["runs", "--limit", "0"], {}, 2, "--limit"),
    ("kbench", ["analyze", str(DATA / "proton_h100" / "mla_v3.hatchet")], {}, 2, "pass --plan"),  # a needed --plan
    ("kbench", ["nosuchcommand"], {}, 2, "No such command"),
]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One earlier profile, copied into each case's folder."""
    root = tmp_path_factory.mktemp("earlier") / "profiles"
    earlier_run(root)
    return root


@pytest.mark.slow
@pytest.mark.parametrize(("module", "args", "env", "code", "fragment"), CASES, ids=[" ".join(c[1])[:60] for c in CASES])
def test_bad_input_is_one_line_and_changes_nothing(
    module: str, args: list[str], env: dict[str, str], code: int, fragment: str, tmp_path: Path, made: Path
) -> None:
    shutil.copytree(made, tmp_path / "profiles")
    earlier = next((tmp_path / "profiles").rglob("report.md")).parent
    before = snapshot(tmp_path)
    done = kbench(*args, module=module, env={"KBENCH_LOCK_CLOCKS": "0", **env}, cwd=tmp_path)
    assert done.code == code, done.stderr
    one_line(done.stderr, fragment)
    assert snapshot(tmp_path) == before  # nothing written, nothing changed (the earlier run included)
    assert (earlier / "report.md").is_file()


def _malformed(tmp_path: Path) -> dict[str, Path]:
    real = CAPTURE.read_bytes()
    files = {
        "random.ncu-rep": bytes(range(256)) * 8,
        "truncated.ncu-rep": real[: len(real) // 3],
        "empty.ncu-rep": b"",
        "trace-not-json.json": b"{not json",
        "trace-no-events.json": b'{"traceEvents": 5}',
        "trace-bad-ts.json": json.dumps(
            {"traceEvents": [{"cat": "kernel", "ph": "X", "ts": "soon", "dur": 1, "name": "k"}]}
        ).encode(),
        "trace-negative-dur.json": json.dumps(
            {"traceEvents": [{"cat": "kernel", "ph": "X", "ts": 1, "dur": -5, "name": "k"}]}
        ).encode(),
    }
    out = {}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        out[name] = tmp_path / name
    db = tmp_path / "no-tables.sqlite"
    sqlite3.connect(db).close()
    out["no-tables.sqlite"] = db
    notasqlite = tmp_path / "text.sqlite"
    notasqlite.write_text("not a database")
    out["text.sqlite"] = notasqlite
    return out


EXPECTED = {
    "random.ncu-rep": "not a readable Nsight Compute report",
    "truncated.ncu-rep": "truncated or corrupt Nsight Compute report",
    "empty.ncu-rep": "not a readable Nsight Compute report",
    "trace-not-json.json": "is not a PyTorch-profiler Chrome trace",
    "trace-no-events.json": "traceEvents is not a list",
    "trace-bad-ts.json": "trace event 0 is malformed",
    "trace-negative-dur.json": "trace event 0 is malformed (dur is -5.0)",
    "no-tables.sqlite": "holds no CUDA kernel activity",
    "text.sqlite": "not a readable nsys SQLite export",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPECTED))
def test_a_malformed_capture_is_one_line_exit_4_and_no_folder(name: str, tmp_path: Path) -> None:
    path = _malformed(tmp_path)[name]
    done = kbench("analyze", str(path), "--out", str(tmp_path / "out"))
    assert done.code == 4, done.stderr
    one_line(done.stderr, EXPECTED[name])
    assert not (tmp_path / "out").exists()  # refused before a run folder was made


@pytest.mark.slow
def test_a_corrupt_device_table_is_one_line(tmp_path: Path) -> None:
    raw = json.loads((ROOT / "conf" / "devices.json").read_text())
    for name, table, fragment in [
        ("schema", {**raw, "schema": 2}, "field schema: Input should be 1"),
        ("json", None, "not valid JSON"),
        ("dupkey", None, "key 'schema' appears twice"),
    ]:
        path = tmp_path / f"{name}.json"
        if name == "json":
            path.write_text("{")
        elif name == "dupkey":
            path.write_text(json.dumps(raw, indent=1).replace('"note"', '"schema": 1,\n "note"', 1))
        else:
            path.write_text(json.dumps(table))
        done = kbench("vector_add", "--predict", "--device", "H100_SXM", module=K, env={"KBENCH_DEVICES": str(path)})
        assert done.code == 4
        one_line(done.stderr, fragment)


def test_a_state_folder_that_is_a_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench.errors import ConfigError
    from kbench.fsutil import state_dir

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("KBENCH_STATE_DIR", str(tmp_path / "file"))
    with pytest.raises(ConfigError, match="is not a folder"):
        state_dir()


@pytest.mark.slow
def test_a_broken_user_package_is_listed_as_broken_and_the_rest_as_usual(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "__init__.py").write_text("import no_such_module_here\n")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "__init__.py").write_text('"""half"""\n')
    (tmp_path / "half" / "base.py").write_text((DATA / "user_kernels_clone" / "scale" / "v1.py").read_text())
    (tmp_path / "half" / "v2.py").write_text("import no_such_module_either\n")
    done = kbench("list", "--kernel-path", str(tmp_path))
    assert done.code == 0, done.stderr
    assert "bad: BROKEN: cannot import kernel package" in done.stdout and "no_such_module_here" in done.stdout
    assert "  v2: BROKEN: cannot import half v2" in done.stdout and "  base  (baseline): y = 2x" in done.stdout
    assert "vector_add: " in done.stdout and "matmul: " in done.stdout
