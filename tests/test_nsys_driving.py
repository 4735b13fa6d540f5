"""nsys mode's driving code on a CPU: the exact command lines, where nsys is looked for, and the whole run with a
stand-in nsys (a script on KBENCH_NSYS) that either hands back kbench's real H100 capture or fails the way the
nsys inside Nsight Compute fails without libdw, so that the PyTorch-profiler fallback takes over (its child
process, which needs a GPU, replaced by kbench's real fallback capture)."""

from __future__ import annotations

import json
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from kbench import pipeline
from kbench.analysis.devices import load_devices, resolve
from kbench.capture import gpu, tools
from kbench.capture.nsys_argv import export_argv, profile_argv
from kbench.errors import KernelError
from kbench.modes import nsys
from kbench.modes.base import RunOptions
from kbench.plan.discovery import load_version
from kbench.report.mode_sections import ModeSections, Timeline
from kbench.report.models import ProfileResult
from tests.conftest import DATA, contract_problems

KBENCH = DATA / "kbench_h100"
CHILD = ["/usr/bin/python3", "-m", "kbench.capture.child", "/r/child-spec.json"]


def test_nsys_command_lines_are_exact() -> None:
    assert profile_argv(Path("/opt/nsys"), Path("/r/timeline"), CHILD) == [
        "/opt/nsys",
        "profile",
        "-t",
        "cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--cuda-graph-trace=node",
        "--force-overwrite=true",
        "-o",
        "/r/timeline",
        *CHILD,
    ]
    assert export_argv(Path("/opt/nsys"), Path("/r/t.nsys-rep"), Path("/r/t.sqlite")) == [
        "/opt/nsys",
        "export",
        "-t",
        "sqlite",
        "--force-overwrite=true",
        "-o",
        "/r/t.sqlite",
        "/r/t.nsys-rep",
    ]


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_where_nsys_is_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("KBENCH_NSYS", "KBENCH_NCU"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setattr(tools, "OPT_NVIDIA", tmp_path / "opt")
    with pytest.raises(tools.ToolMissing, match="install it or set KBENCH_NSYS"):
        tools.find_nsys()
    # a toolkit's bin/ncu (a wrapper) and the Nsight Compute installs it runs: the newest one's nsys
    _exe(tmp_path / "cuda" / "bin" / "ncu")
    old = _exe(tmp_path / "opt" / "nsight-compute" / "2025.1.0" / "host" / "target-linux-x64" / "nsys")
    new = _exe(tmp_path / "opt" / "nsight-compute" / "2025.3.1" / "host" / "target-linux-x64" / "nsys")
    assert tools.find_nsys() == new and old.exists()
    beside = _exe(tmp_path / "cuda" / "nsight-compute-2025.3.1" / "host" / "target-linux-x64" / "nsys")
    assert tools.find_nsys() == beside  # <toolkit>/nsight-compute-* comes before /opt/nvidia
    systems = _exe(tmp_path / "opt" / "nsight-systems" / "2025.5.1" / "bin" / "nsys")
    assert tools.find_nsys() == systems  # a real Nsight Systems install beats the copy inside Nsight Compute
    assert tools.find_nsys() != _exe(tmp_path / "opt" / "nsight-systems" / "2024.1.1" / "bin" / "nsys")
    cuda = _exe(tmp_path / "cuda" / "bin" / "nsys")
    assert tools.find_nsys() == cuda
    on_path = _exe(tmp_path / "empty" / "nsys")
    assert tools.find_nsys() == on_path
    monkeypatch.setenv("KBENCH_NSYS", str(tmp_path / "nowhere"))
    with pytest.raises(tools.ToolMissing, match=r"KBENCH_NSYS=.* is not an executable file"):
        tools.find_nsys()


STAND_IN = """#!{python}
import pathlib, shutil, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.3.1.90-253135822008v0")
    sys.exit(0)
out = pathlib.Path(args[args.index("-o") + 1])
{body}
"""
SUCCEEDS = f"""
if args[0] == "profile":
    shutil.copy({str(KBENCH / "child_fork_join.json")!r}, out.parent / "child.json")
    out.with_suffix(".nsys-rep").write_bytes(b"stand-in")
    print("Generated:", out.with_suffix(".nsys-rep"))
else:
    shutil.copy({str(KBENCH / "nsys_fork_join.sqlite")!r}, out)
"""
NO_IMPORTER = """
print("Generating '/tmp/nsys-report-1.qdstrm'")
print("Unable to retrieve the importer version: skipping importation of the QDSTRM file")
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated: Path):
    monkeypatch.setattr(gpu, "require_cuda", lambda what, torch=True: None)
    h100 = resolve(load_devices(), "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(gpu, "active_device", lambda table=None, torch=True: h100)

    def install(body: str) -> None:
        script = tmp_path / "bin" / "nsys"
        script.parent.mkdir(exist_ok=True)
        script.write_text(STAND_IN.format(python=sys.executable, body=body))
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("KBENCH_NSYS", str(script))

    return install


def profile(backend: str = "auto", **kw: Any):
    plan = load_version("fork_join").from_values({})
    opts = RunOptions(out_root=Path("prof"), progress=lambda m: None, timeline_backend=backend, **kw)
    return pipeline.profile("nsys", plan, opts)


def timeline_of(r: ProfileResult) -> Timeline:
    assert isinstance(r.sections, ModeSections) and r.sections.timeline is not None
    return r.sections.timeline


def tiling_of(r: ProfileResult) -> dict[str, Any]:
    assert r.sections.tiling is not None
    return r.sections.tiling.stages


def the_run() -> tuple[Path, dict[str, Any]]:
    (run,) = list(Path("prof/nsys/fork_join").glob("*/*"))
    return run, json.loads((run / "params.json").read_text())


def torch_capture(child: list[str], run_dir: Path, opts: RunOptions) -> Path:
    """The PyTorch-profiler child's result, as it wrote it on the H100."""
    assert json.loads(Path(child[-1]).read_text())["backend"] == "torch"
    shutil.copy(KBENCH / "child_fork_join.json", run_dir / "child.json")
    return Path(shutil.copy(KBENCH / "torch_fork_join.json", run_dir / "pytorch_trace.json"))


def test_a_capture_by_nsys_becomes_the_report(stand_in) -> None:
    stand_in(SUCCEEDS)
    r = profile()
    run, params = the_run()
    assert contract_problems(run / "report.md") == [] and (run / "report.md").read_text() == r.report_md
    captured = timeline_of(r).capture
    assert captured.startswith("Nsight Systems 2025.3.1.90 (`timeline.nsys-rep`, exported to `timeline.sqlite`)")
    assert params["status"] == "ok" and params["capture_backend"] == "nsys" and params["nsys_not_used"] is None
    assert params["nsys_command"].split()[1:7] == [
        "profile",
        "-t",
        "cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--cuda-graph-trace=node",
    ]
    assert "kbench.capture.child" in params["nsys_command"] and "export -t sqlite" in params["nsys_export_command"]
    spec = json.loads((run / "child-spec.json").read_text())
    assert spec["program"] == "timeline" and spec["backend"] == "nsys" and spec["iterations"] == 100
    assert r.check and r.check.startswith("PASS") and tiling_of(r)["mm"]["grid"] == [1024]
    t = timeline_of(r).analysis
    assert t.overlap is not None and len(t.windows) == 100


def test_nsys_without_its_importer_falls_back_to_the_pytorch_profiler(stand_in, monkeypatch) -> None:
    stand_in(NO_IMPORTER)
    monkeypatch.setattr(nsys, "capture_torch", torch_capture)
    r = profile()
    run, params = the_run()
    assert contract_problems(run / "report.md") == []
    captured = timeline_of(r).capture
    assert "PyTorch profiler (CUPTI)" in captured and "nsys was not used: nsys wrote no report" in captured
    assert "LD_LIBRARY_PATH" in params["nsys_not_used"] and params["capture_backend"] == "torch"
    assert (run / "nsys.log").read_text().count("skipping importation") == 1
    assert len(timeline_of(r).analysis.windows) == 20


def test_asking_for_nsys_turns_its_failure_into_one_line(stand_in) -> None:
    stand_in(NO_IMPORTER)
    with pytest.raises(nsys.CaptureFailed, match="nsys wrote no report: its importer could not load") as e:
        profile(backend="nsys")
    assert "\n" not in str(e.value) and str(e.value).endswith(
        "--timeline-backend auto falls back to PyTorch's profiler"
    )
    run, params = the_run()
    assert params["status"] == "failed" and not (run / "report.md").exists()


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (
            "print('kbench child: stage rowsum failed: RuntimeError: CUDA error: an illegal memory access'); "
            "sys.exit(5)",
            KernelError,
            "the plan failed under nsys: stage rowsum failed: RuntimeError: CUDA error",
        ),
        ("print('Error: unrecognised option'); sys.exit(1)", nsys.CaptureFailed, "nsys failed: Error: unrecognised"),
        (
            "out.with_suffix('.nsys-rep').write_bytes(b'x') if args[0] == 'profile' else sys.exit(3)",
            nsys.CaptureFailed,
            "nsys export to SQLite failed (exit code 3",
        ),
    ],
)
def test_failures_under_nsys_are_one_line_and_marked(stand_in, body: str, error: type, message: str) -> None:
    stand_in(body)
    with pytest.raises(error, match=message.replace("(", r"\(")):
        profile(backend="nsys")
    assert the_run()[1]["status"] == "failed"


def test_a_crashing_plan_is_not_retried_under_another_backend(stand_in, monkeypatch) -> None:
    stand_in("print('kbench child: correctness check failed: FAIL: relative L2 error 1'); sys.exit(5)")
    monkeypatch.setattr(nsys, "capture_torch", lambda *a: pytest.fail("the fallback must not run"))
    with pytest.raises(KernelError, match="correctness check failed"):
        profile()


@pytest.mark.slow
def test_a_hanging_nsys_is_killed(stand_in) -> None:
    stand_in("import time; time.sleep(60)")
    with pytest.raises(tools.ToolTimeout, match="ran past 1 s"):
        profile(timeout_s=1.0)
    assert the_run()[1]["status"] == "failed"


def test_missing_nsys_falls_back_and_asking_for_it_fails(stand_in, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KBENCH_NSYS", str(tmp_path / "no-nsys"))
    with pytest.raises(tools.ToolMissing, match=r"KBENCH_NSYS=.* is not an executable file"):
        profile(backend="nsys")
    assert not Path("prof").exists()  # refused before any folder was made
    monkeypatch.setattr(nsys, "capture_torch", torch_capture)
    r = profile()
    assert "nsys was not used: KBENCH_NSYS=" in timeline_of(r).capture and the_run()[1]["capture_backend"] == "torch"
