"""kbench.ncu_preload: ncu_report's metric library loaded in a thread while `kbench analyze` imports, on a
real ncu report (the H100 fixture)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from kbench import ncu_preload
from tests.conftest import DATA

CAPTURE = DATA / "ncu_h100" / "ann_mm.ncu-rep"

needs_library = pytest.mark.skipif(
    ncu_preload.library() is None or not sys.platform.startswith("linux"),
    reason="ncu_report's metric library is not installed here",
)


def _python(code: str, *args: str, cwd: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=os.environ
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_other_captures_and_a_missing_library_preload_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ncu_preload.start(Path("trace.sqlite")) is None
    assert ncu_preload.start(Path("profile.hatchet")) is None
    monkeypatch.setattr(ncu_preload, "library", lambda: None)
    assert ncu_preload.start(CAPTURE) is None


LOADED = """
import json, sys
from pathlib import Path
from kbench import ncu_preload
def mapped():
    return ncu_preload.LIBRARY in Path("/proc/self/maps").read_text()
before = mapped()
thread = ncu_preload.start(Path(sys.argv[1]))
thread.join()
preloaded = mapped() and "ncu_report" not in sys.modules
import ncu_report
report = ncu_report.load_report(sys.argv[1])
duration = report.range_by_idx(0).action_by_idx(0).metric_by_name("gpu__time_duration.sum").as_double()
print(json.dumps({"before": before, "preloaded": preloaded, "duration_ns": duration}))
"""


@needs_library
def test_the_library_is_loaded_before_ncu_report_and_ncu_report_reads_through_it(tmp_path: Path) -> None:
    seen = _python(LOADED, str(CAPTURE), cwd=tmp_path)
    assert seen["before"] is False and seen["preloaded"] is True
    # the same value the report holds read without a preload (tests/test_ncu_analysis.py reads it in-process)
    from kbench.analysis import ncu

    [first, *_] = ncu.kernels(CAPTURE)
    assert first.metrics["duration_ns"] == seen["duration_ns"]


ORDER = """
import importlib.machinery, json, sys, threading
from kbench import ncu_preload
from kbench.cli import entry
order, started = [], []
sys.addaudithook(lambda event, args: order.append(args[0]) if event == "import" else None)
real_start = threading.Thread.start
def start(thread):
    real_start(thread)
    if thread.name == "kbench-nvperf-preload":
        started.append(len(order))
threading.Thread.start = start
try:
    entry.main(["analyze", sys.argv[1], "--out", sys.argv[2]])
except SystemExit as e:
    code = e.code
def extension(name):
    return str(getattr(sys.modules.get(name), "__file__", "") or "").endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES))
late = sorted({m for m in order[started[0]:] if extension(m) and not m.startswith("ncu_report")})
print(json.dumps({"code": code, "started": len(started), "late": late}))
"""


@pytest.mark.slow
@needs_library
def test_no_extension_module_is_imported_while_the_library_loads(tmp_path: Path) -> None:
    """An extension module imported after the preload starts waits on the dynamic loader for the whole library and
    undoes the gain: each one the analysis of an .ncu-rep imports is in ncu_preload.EXTENSIONS."""
    seen = _python(ORDER, str(CAPTURE), str(tmp_path / "prof"), cwd=tmp_path)
    assert seen == {"code": 0, "started": 1, "late": []}, "add these to ncu_preload.EXTENSIONS"


WHILE = """
import json, sys
from kbench import ncu_preload
ncu_preload.start = lambda capture: None
from kbench.cli import entry
try:
    entry.main(["analyze", sys.argv[1], "--out", sys.argv[2]])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "missing": [m for m in ncu_preload.WHILE_LOADING if m not in sys.modules]}))
"""
ALONE = """
import importlib, json, sys
from kbench import ncu_preload
for name in ncu_preload.WHILE_LOADING:
    importlib.import_module(name)
print(json.dumps({"pydantic": sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core"))}))
"""


@pytest.mark.slow
def test_what_is_imported_while_the_library_loads_is_what_the_analysis_imports_and_never_pydantic(
    tmp_path: Path,
) -> None:
    """ncu_preload.WHILE_LOADING is imported while the library loads: each module must be one the analysis imports
    anyway (else the preload adds work), and none may bring in pydantic_core (whose first thread-local access waits
    for the loader)."""
    assert _python(WHILE, str(CAPTURE), str(tmp_path / "prof"), cwd=tmp_path) == {"code": 0, "missing": []}
    assert _python(ALONE, cwd=tmp_path) == {"pydantic": []}


@pytest.mark.slow
@needs_library
def test_the_sass_warm_up_reads_real_sass_and_leaves_the_stage_s_sass_as_it_was() -> None:
    """ncu mode readies ncu_report's disassembler on kbench's own tiny report while ncu runs: that report must hold
    SASS (else the warm-up does nothing), and a stage's SASS read after it is the same text."""
    full = DATA / "ncu_h100" / "full_mm.ncu-rep"
    alone = _python(SASS, str(full), cwd=DATA)  # in a fresh process: no warm-up before it
    warmed = _python(SASS, str(ncu_preload.SASS_WARMUP), str(full), cwd=DATA)
    [stage] = cast(list[str], alone["sass"])
    assert stage.startswith("LDC R1") and warmed["sass"] == ["LDC R1, c[0x0][0x28]", stage]
    assert warmed["thread"] == "kbench-sass-warmup"


SASS = """
import json, sys
from pathlib import Path
from kbench import ncu_preload
thread = ncu_preload.warm_sass()
thread.join()
print(json.dumps({"thread": thread.name, "sass": [ncu_preload.first_sass(Path(f)) for f in sys.argv[1:]]}))
"""


def test_no_sass_warm_up_without_ncu_report_and_nothing_from_unreadable_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "truncated.ncu-rep").write_bytes((DATA / "ncu_h100" / "full_mm.ncu-rep").read_bytes()[:20000])
    (tmp_path / "text.ncu-rep").write_text("not a report\n")
    for name in ("truncated.ncu-rep", "text.ncu-rep", "missing.ncu-rep"):
        assert ncu_preload.first_sass(tmp_path / name) == ""
    assert ncu_preload.first_sass(DATA / "ncu_h100" / "ann_mm.ncu-rep") == ""  # no source counters
    monkeypatch.setattr(ncu_preload, "library", lambda: None)
    assert ncu_preload.warm_sass() is None
