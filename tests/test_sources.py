"""One process, several profiles: every profile runs the version's current source (issue 27). A user package is
copied to a temporary folder and edited between runs, through the API, `kbench check` (its kernel run by Triton's
interpreter), the MCP server's profile tool (its in-memory client) and `kbench compare`; edits keep the file's size
and mtime where they can, which a .pyc's check or linecache's would not notice."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from kbench import pipeline
from kbench.capture import prepare
from kbench.cli.mcp_server import build
from kbench.errors import UsageError
from kbench.modes.base import RunOptions
from kbench.plan import autotune, sources
from kbench.plan.base import KernelPlan
from kbench.plan.discovery import current, load_version
from kbench.report.comparison import compare_runs
from kbench.report.models import ProfileResult
from kbench.report.source import Source, change
from tests.conftest import DATA, Ran, contract_problems
from tests.pipeline_fakes import offline_gpu, replay

TIMINGS = DATA / "event_h100" / "vector_add_base" / "timings.json"  # one stage's real H100 samples, replayed


@pytest.fixture
def kp(tmp_path: Path) -> Path:
    """A fresh copy of the xstages package (v1 alone; v2 importing _common) in its own kernel folder."""
    shutil.copytree(DATA / "user_kernels_edit", tmp_path / "kp")
    return tmp_path / "kp"


def edit(path: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in ``path``; the file keeps its mtime (and, for equal lengths, its size)."""
    text, st = path.read_text(), path.stat()
    assert old in text
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def version(kp: Path, name: str) -> type[KernelPlan]:
    return load_version("xstages", name, [str(kp)])


def test_import_statements_name_the_modules_they_may_load() -> None:
    tree = ast.parse(
        "import torch.cuda\nfrom . import _common\nfrom ._triton import k as kk\nfrom .. import other\n"
        "from kbench.kernel.matmul._common import mm\ndef f():\n    from .v1 import PLAN\nfrom .x import *\n"
    )
    names = sources.imported_names("ns.pkg.v2", tree, is_package=False)
    assert {"torch", "torch.cuda", "ns.pkg", "ns.pkg._common", "ns.pkg._triton", "ns.pkg._triton.k"} <= names
    assert {"ns.other", "kbench.kernel.matmul._common.mm", "ns.pkg.v1", "ns.pkg.v1.PLAN", "ns.pkg.x"} <= names
    assert "ns.pkg.x.*" not in names
    # in a package's __init__, "." is the package itself
    assert "ns.pkg._common" in sources.imported_names("ns.pkg", ast.parse("from . import _common"), is_package=True)


def test_an_edit_is_seen_and_an_unchanged_version_stays_loaded(kp: Path) -> None:
    v1, v2 = version(kp, "v1"), version(kp, "v2")
    assert version(kp, "v1") is v1 and version(kp, "v2") is v2  # nothing changed: nothing loaded again
    assert sources.refresh() == []
    edit(kp / "xstages" / "v2.py", '"num_stages": 4', '"num_stages": 3')  # same size, same mtime
    v2b = version(kp, "v2")
    assert v2b is not v2 and v2b.from_values({}).stages()[0].tuning[0]["num_stages"] == 3
    assert version(kp, "v1") is v1  # the edit of another version leaves this one warm
    # a helper of the package: the version importing it is loaded again, the one that does not stays
    edit(kp / "xstages" / "_common.py", "FACTOR = 2.0", "FACTOR = 3.0")
    v2c = version(kp, "v2")
    assert v2c is not v2b and sys.modules[v2c.__module__].FACTOR == 3.0
    assert version(kp, "v1") is v1
    # v2 subclasses v1: an edit of v1 loads both again
    edit(kp / "xstages" / "v1.py", "elements (v1)", "elements (V1)")
    v1b = version(kp, "v1")
    assert v1b is not v1 and version(kp, "v2") is not v2c and issubclass(version(kp, "v2"), v1b)
    # the package's __init__: everything in it; a plan made before is made again, its package found through the
    # folder it was loaded from
    plan = v1b.from_values({"n": 8})
    edit(kp / "xstages" / "__init__.py", "a package", "A package")
    renewed = current(plan)
    assert type(renewed) is not v1b and type(renewed) is version(kp, "v1") and renewed.values() == plan.values()
    (kp / "xstages" / "v2.py").unlink()
    with pytest.raises(UsageError, match="unknown version 'v2' of xstages; versions: v1"):
        version(kp, "v2")


def test_check_runs_the_edited_kernel_and_helper(cli: Callable[..., Ran], kp: Path) -> None:
    """`kbench check` in one process: the kernel edited (the check fails), then the helper the reference reads (it
    passes again); Triton's interpreter runs each kernel, so its function is the edited source."""

    def checked() -> str:
        done = cli("check", "xstages", "v2", "--kernel-path", str(kp))
        return done.stdout + done.stderr

    assert "scale {'BLOCK': 256, 'num_warps': 4, 'num_stages': 4}: PASS" in checked()
    edit(kp / "xstages" / "v2.py", "n) * 2.0", "n) * 3.0")
    assert "FAIL" in checked()
    edit(kp / "xstages" / "_common.py", "FACTOR = 2.0", "FACTOR = 3.0")
    assert "PASS" in checked()


def _profile(monkeypatch: pytest.MonkeyPatch, plan: KernelPlan, out: Path) -> ProfileResult:
    replay(monkeypatch, TIMINGS)
    opts = RunOptions(out_root=out, check=False, progress=lambda msg: None, bench_runs=100)
    return pipeline.profile("event", plan, opts)


def test_the_api_profiles_the_current_source_of_a_plan_made_before_an_edit(
    kp: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline_gpu(monkeypatch)
    plan = version(kp, "v2").from_values({})
    first = _profile(monkeypatch, plan, isolated / "out")
    edit(kp / "xstages" / "v2.py", '"num_stages": 4', '"num_stages": 3')
    second = _profile(monkeypatch, plan, isolated / "out")  # the same plan object, as in a notebook
    assert "num_stages=4" in first.report_md and "num_stages=3" in second.report_md
    assert first.source is not None and second.source is not None
    assert second.source.module == "xstages/v2.py"
    assert set(second.source.files) == {f"xstages/{m}.py" for m in ("__init__", "_common", "v1", "v2")}
    assert first.source.digest != second.source.digest
    assert first.source.files["xstages/_common.py"] == second.source.files["xstages/_common.py"]
    report = second.report_md
    assert f"- Source: xstages/v2.py {second.source.files['xstages/v2.py'][:12]}, with " in report
    assert "Source: changed (digest " in report and "edited: xstages/v2.py; unchanged: xstages/" in report
    assert contract_problems(second.path / "report.md") == []
    params = json.loads((second.path / "params.json").read_text())
    assert params["source"]["digest"] == second.source.digest
    facts = json.loads((second.path / "report.json").read_text())
    assert facts["environment"]["source"]["digest"] == second.source.digest
    assert facts["baseline_code_changed"] is True and "edited: xstages/v2.py" in facts["baseline_code"]
    # kbench compare says it too; and a third run of the same source is "unchanged"
    compared = compare_runs(first.path, second.path)
    assert compared.source_changed is True and compared.notes[0].startswith("source: changed (digest")
    third = _profile(monkeypatch, plan, isolated / "out")
    assert compare_runs(second.path, third.path).source_changed is False
    assert "Source: unchanged (digest " in third.report_md


def _call(server: Any, steps: list[tuple[str, dict[str, Any]]], errors: bool = False) -> list[Any]:
    """Each tool's structured answer, or (``errors``) each one's error line."""
    answers: list[Any] = []

    async def main() -> None:
        async with Client(server) as c:
            for name, args in steps:
                r = await c.call_tool(name, args)
                if errors:
                    assert r.is_error
                    answers.append(r.content[0].text)  # type: ignore[union-attr]
                    continue
                assert not r.is_error and r.structured_content is not None, r.content
                answers.append(r.structured_content)

    anyio.run(main)
    return answers


def test_mcp_profiles_an_edited_clone_with_its_edit(kp: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's report: profile v2, clone it to v9, edit v9, profile v9: the report is v9's edited kernel. The
    stages are prepared and checked on the CPU (Triton's interpreter runs them): an edit that breaks the kernel
    fails the next profile's check."""
    offline_gpu(monkeypatch)
    monkeypatch.setattr(prepare, "prepare_on_gpu", lambda plan, device, seed: prepare.prepare(plan, "cpu", seed=seed))
    server = build([str(kp)])
    out = str(isolated / "out")
    replay(monkeypatch, TIMINGS)
    (first, cloned) = _call(
        server,
        [
            ("profile", {"kernel": "xstages", "version": "v2", "out": out}),
            ("clone_version", {"kernel": "xstages", "source": "v2", "target": "v9"}),
        ],
    )
    assert "num_stages=4" in first["report_md"]
    edit(Path(cloned["path"]), '"num_stages": 4', '"num_stages": 3')
    replay(monkeypatch, TIMINGS)
    (second,) = _call(server, [("profile", {"kernel": "xstages", "version": "v9", "out": out})])
    assert second["report_md"].startswith("# Profile: xstages v9") and "num_stages=3" in second["report_md"]
    source, before = (r["report"]["environment"]["source"] for r in (second, first))
    assert source["module"] == "xstages/v9.py" and source["digest"] != before["digest"]
    assert "another version module (xstages/v2.py -> xstages/v9.py)" in second["report_md"]
    # unchanged since: the warm path keeps the class it loaded
    loaded = version(kp, "v9")
    replay(monkeypatch, TIMINGS)
    _call(server, [("profile", {"kernel": "xstages", "version": "v9", "out": out})])
    assert version(kp, "v9") is loaded
    edit(Path(cloned["path"]), "n) * 2.0", "n) * 3.0")  # the kernel now computes 3x
    replay(monkeypatch, TIMINGS)
    (failed,) = _call(server, [("profile", {"kernel": "xstages", "version": "v9", "out": out})], errors=True)
    assert "correctness check failed: FAIL: relative L2 error 0.5 (tolerance 1e-05)" in failed, failed


def test_what_changed_between_two_records() -> None:
    a = Source(module="p/v1.py", files={"p/v1.py": "1" * 64, "p/_c.py": "2" * 64}, digest="aaaaaaaaaaaa")
    b = Source(module="p/v2.py", files={"p/v2.py": "3" * 64, "p/_c.py": "4" * 64, "p/_d.py": "5" * 64}, digest="b" * 12)
    assert change(a, a).changed is False and "unchanged (digest aaaaaaaaaaaa)" in change(a, a).line
    moved = change(a, b)
    assert moved.changed is True
    assert moved.line == (
        "changed (digest aaaaaaaaaaaa -> bbbbbbbbbbbb): another version module (p/v1.py -> p/v2.py); edited: p/_c.py; "
        "now imported: p/_d.py"
    )
    assert change(None, b).changed is None and change(None, b).line.startswith("n/a: the earlier run")
    assert Source.of({"module": 1}) is None and Source.of(None) is None


def test_a_child_that_loaded_other_source_is_what_is_recorded() -> None:
    here = {"module": "p/v1.py", "files": {"p/v1.py": "1" * 64}, "digest": "aaaaaaaaaaaa"}
    there = {"module": "p/v1.py", "files": {"p/v1.py": "2" * 64}, "digest": "bbbbbbbbbbbb"}
    ran = pipeline.ran_source(here, there)
    assert ran is not None and ran.digest == "bbbbbbbbbbbb" and ran.note is not None and "aaaaaaaaaaaa" in ran.note
    same = pipeline.ran_source(here, here)
    assert same is not None and same.note is None and same.digest == "aaaaaaaaaaaa"
    assert pipeline.ran_source(None, None) is None


def test_an_autotune_entry_counts_for_the_source_it_was_tuned_on(tmp_path: Path) -> None:
    space = [{"BLOCK": 64}, {"BLOCK": 128}]
    calls: list[int] = []

    def timer(cfgs: Sequence[dict[str, int]]) -> list[list[float]]:
        calls.extend(c["BLOCK"] for c in cfgs)
        return [[float(c["BLOCK"])] for c in cfgs]

    path = tmp_path / "e.json"
    assert autotune.tune(space, timer, path, "t", source="aaaaaaaaaaaa").source == "tuned"
    assert autotune.tune(space, timer, path, "t", source="aaaaaaaaaaaa").source == "cache"
    assert autotune.tune(space, timer, path, "t", source="bbbbbbbbbbbb").source == "tuned"  # edited: tuned again
    assert calls == [64, 128, 64, 128] and json.loads(path.read_text())["source"] == "bbbbbbbbbbbb"


def test_analyze_carries_the_source_its_capture_ran(tmp_path: Path, cli: Callable[..., Ran]) -> None:
    capture = tmp_path / "run" / "profile.ncu-rep"
    capture.parent.mkdir()
    shutil.copy(DATA / "kbench_h100" / "annotation_matmul_base.ncu-rep", capture)
    recorded = {"module": "matmul/base.py", "files": {"matmul/base.py": "c" * 64}, "digest": "cccccccccccc"}
    (capture.parent / "params.json").write_text(json.dumps({"kernel": "matmul", "source": recorded}))
    done = cli("analyze", str(capture), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    (report,) = (tmp_path / "out").rglob("report.md")
    assert f"- Source: matmul/base.py {'c' * 12} (sha256 of the source that ran; digest cccccccccccc)" in (
        report.read_text()
    )


def test_a_kernel_module_imported_before_kbench_loaded_it_is_loaded_again(tmp_path: Path) -> None:
    """Imported the plain way (through a .pyc whose source is unknown), a shipped version is loaded afresh by the
    first load_version, which records its source."""
    program = (
        "import sys, json\n"
        "import kbench.kernel.vector_add.base as plain\n"
        "from kbench.plan.discovery import load_version\n"
        "from kbench.plan.sources import record\n"
        "cls = load_version('vector_add')\n"
        "m = sys.modules[cls.__module__]\n"
        "print(json.dumps({'same': cls is plain.PLAN, 'loader': type(m.__loader__).__name__, "
        "'files': sorted(record(cls.__module__)['files'])}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env={**os.environ}, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "same": False,
        "loader": "HashedLoader",
        "files": ["vector_add/__init__.py", "vector_add/base.py"],
    }


@pytest.mark.gpu
def test_on_a_gpu_the_edited_kernel_is_compiled_and_run(kp: Path, isolated: Path) -> None:
    """Event mode on a CUDA device, three runs in one process: the kernel edited to compute 3x fails the check (Triton
    compiled the edited source, not the kernel it had compiled and cached), and with the helper edited to match it
    passes, its PTX another kernel's."""
    from kbench.api import event_profile_plan
    from kbench.errors import KernelError

    plan = version(kp, "v2").from_values({"n": 1 << 20})
    first = event_profile_plan(plan, out_dir="prof", bench_runs=5)
    edit(kp / "xstages" / "v2.py", "n) * 2.0", "n) * 3.0")
    with pytest.raises(KernelError, match="correctness check failed: FAIL"):
        event_profile_plan(plan, out_dir="prof", bench_runs=5)
    edit(kp / "xstages" / "_common.py", "FACTOR = 2.0", "FACTOR = 3.0")
    third = event_profile_plan(plan, out_dir="prof", bench_runs=5)
    assert first.source is not None and third.source is not None
    assert set(first.source.files) == set(third.source.files) and first.source.digest != third.source.digest
    assert json.loads((third.path / "params.json").read_text())["correctness"].startswith("PASS")

    def ptx(r: ProfileResult) -> str:
        (path,) = (r.path / "compiled" / "scale").glob("*.ptx")
        return path.read_text()

    assert ptx(first) != ptx(third)
    assert "edited: xstages/_common.py, xstages/v2.py" in third.report_md  # against the first: the failed run is not
