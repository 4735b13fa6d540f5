"""Golden reports: every report kbench writes from the committed captures (tests/data and docs/examples, through
`kbench analyze`) and from real H100 event-mode samples (through the event pipeline with the GPU-facing calls
replaced) must stay the same, run paths and timestamps aside. The goldens in tests/data/golden were written by
this file (KBENCH_REGEN_GOLDEN=1) before the pipeline refactor of issue 10; a change to a report is a change to
the product and must regenerate them on purpose, in its own commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench import pipeline
from kbench.cli.app import app
from kbench.modes.base import RunOptions
from kbench.plan.discovery import load_version, with_version
from tests.conftest import DATA, contract_problems
from tests.pipeline_fakes import offline_gpu, replay

ROOT = Path(__file__).parents[1]
GOLDEN = DATA / "golden"
REGEN = os.environ.get("KBENCH_REGEN_GOLDEN") == "1"
EXAMPLES = ROOT / "tests" / "data" / "examples_h100_1122"  # docs/examples as of 2026-11-22..24, kept as test inputs

# name -> (capture, kbench analyze arguments after it)
ANALYZE: dict[str, tuple[Path, list[str]]] = {
    "ncu_full_mm_ncu": (DATA / "ncu_h100" / "full_mm.ncu-rep", ["--mode", "ncu"]),
    "ncu_full_mm_ncu_plan": (DATA / "ncu_h100" / "full_mm.ncu-rep", ["--mode", "ncu", "--plan", "matmul"]),
    "ncu_full_mm_annotation": (DATA / "ncu_h100" / "full_mm.ncu-rep", []),
    "ncu_full_add_ncu": (DATA / "ncu_h100" / "full_add.ncu-rep", ["--mode", "ncu"]),
    "ncu_full_add_annotation": (DATA / "ncu_h100" / "full_add.ncu-rep", []),
    "ncu_ann_mm_annotation": (DATA / "ncu_h100" / "ann_mm.ncu-rep", []),
    "ncu_sol_streams_ncu": (DATA / "ncu_h100" / "sol_streams.ncu-rep", ["--mode", "ncu"]),
    "kbench_annotation_matmul_plan": (DATA / "kbench_h100" / "annotation_matmul_base.ncu-rep", ["--plan", "matmul"]),
    "kbench_annotation_vector_add_plan": (
        DATA / "kbench_h100" / "annotation_vector_add_base.ncu-rep",
        ["--plan", "vector_add"],
    ),
    "kbench_annotation_vector_add_ncu": (
        DATA / "kbench_h100" / "annotation_vector_add_base.ncu-rep",
        ["--mode", "ncu"],
    ),
    "docs_annotation_matmul_plan": (EXAMPLES / "annotation-matmul-base" / "profile.ncu-rep", ["--plan", "matmul"]),
    "kbench_nsys_fork_join_plan": (DATA / "kbench_h100" / "nsys_fork_join.sqlite", ["--plan", "fork_join"]),
    "kbench_torch_fork_join_plan": (DATA / "kbench_h100" / "torch_fork_join.json", ["--plan", "fork_join"]),
    "timeline_sqlite": (DATA / "timeline_h100" / "timeline.sqlite", []),
    "docs_torch_vector_add_plan": (
        EXAMPLES / "nsys-vector_add-base-fallback" / "pytorch_trace.json",
        ["--plan", "vector_add"],
    ),
}

# name -> (folder with params.json and timings.json of a real event-mode run)
EVENT: dict[str, Path] = {
    "event_vector_add_base": DATA / "event_h100" / "vector_add_base",
    "event_matmul_base": DATA / "event_h100" / "matmul_base",
    "event_matmul_torch_mm": DATA / "event_h100" / "matmul_torch_mm",
    "event_matmul_base_1024": DATA / "event_h100" / "matmul_base_1024",
    "event_fork_join_base": EXAMPLES / "event-fork_join-base",
    "event_matmul_v2": EXAMPLES / "event-matmul-v2",
}

# Files whose text is compared whole (the rest of a run folder is compared by content hash).
WHOLE = {"report.md"}
# Where the source that ran is named by its hashes (hex with a letter among them: never a number's decimals).
REPORTS = {"report.md", "report.json"}
SOURCE_HASH = re.compile(r"\b(?=[0-9]*[a-f])(?:[0-9a-f]{64}|[0-9a-f]{12})\b")
# Written with run-specific paths, times or a binary renderer's output: not compared.
SKIP = {"params.json", "result.json", "roofline.png", "timeline.png"}


def normalize(text: str, run_dir: Path, root: Path) -> str:
    text = text.replace(str(run_dir), "<RUN>").replace(str(root), "<ROOT>")
    text = re.sub(r"\d{8}T\d{6}Z(-\d\d)?", "<STAMP>", text)
    return re.sub(r"over \d+ busy samples", "over <N> busy samples", text)


def snapshot(run_dir: Path, root: Path) -> dict[str, str]:
    """Every file of a run folder: report.md as text, the others as a hash of their normalized content."""
    out: dict[str, str] = {}
    for p in sorted(run_dir.rglob("*")):
        rel = p.relative_to(run_dir).as_posix()
        if not p.is_file() or p.name in SKIP or rel.startswith(("compiled/", "tiling/")):
            continue
        text = normalize(p.read_text(errors="replace"), run_dir, root)
        if p.name in REPORTS:  # the source's hashes, so that an edit of a shipped kernel changes no golden
            text = SOURCE_HASH.sub("<SHA>", text)
        out[rel] = text if p.name in WHOLE else hashlib.sha256(text.encode()).hexdigest()
    return out


def check_golden(name: str, run_dir: Path, root: Path) -> None:
    got = snapshot(run_dir, root)
    assert contract_problems(run_dir / "report.md") == []
    path = GOLDEN / f"{name}.json"
    if REGEN:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(path.read_text())
    assert got.get("report.md") == want.get("report.md")
    assert got == want


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ANALYZE))
def test_analyze_reports_are_unchanged(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    capture, args = ANALYZE[name]
    done = CliRunner().invoke(app, ["analyze", str(capture), "--out", "out", *args])
    assert done.exit_code == 0, done.output
    (run_dir,) = [p.parent for p in (tmp_path / "out").rglob("report.md")]
    check_golden(name, run_dir, tmp_path)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, isolated: Path) -> Path:
    offline_gpu(monkeypatch)
    return isolated


@pytest.mark.parametrize("name", sorted(EVENT))
def test_event_reports_are_unchanged(name: str, offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = EVENT[name]
    params = json.loads((folder / "params.json").read_text())
    plan = load_version(params["kernel"], params["version"]).from_values(params["params"])
    opts = RunOptions(out_root=Path("out"), check=False, progress=lambda msg: None, bench_runs=100)
    replay(monkeypatch, folder / "timings.json")
    first = pipeline.profile("event", plan, opts)
    check_golden(name, Path(first.out_dir), offline)
    if name == "event_vector_add_base":  # a second run of the same parameters: the vs Baseline section
        replay(monkeypatch, EXAMPLES / "event-vector_add-v2" / "timings.json")
        second = pipeline.profile("event", with_version(plan, "v2"), opts)
        check_golden(f"{name}_then_v2", Path(second.out_dir), offline)


def test_reports_stay_short() -> None:
    """report.md is read whole by agents: every golden report, 3-stage plans included, stays under about
    2,200 tokens (4 characters a token; 2,000 before the Distance section, which added ~220 to a 3-stage timeline)."""
    for path in GOLDEN.glob("*.json"):
        text = json.loads(path.read_text())["report.md"]
        assert len(text) / 4 < 2200, (path.name, len(text))
