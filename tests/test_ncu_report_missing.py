"""Where the ncu_report package is not installed: the module of the Nsight Compute that runs (its extras/python) is
used, and where there is none either, one line saying what to install and exit 7 (it was exit 70, a
ModuleNotFoundError, in annotation mode on the H100 without the package)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kbench.analysis import ncu
from kbench.capture import tools
from kbench.errors import ToolMissing
from kbench.modes import counters
from tests.conftest import DATA

CAPTURE = DATA / "kbench_h100" / "annotation_vector_add_base.ncu-rep"


def install(root: Path, ncu_at: str, module_at: str) -> Path:
    """A fake Nsight Compute install: an executable ``ncu_at`` and ``module_at``/extras/python/ncu_report.py."""
    exe = root / ncu_at
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    module = root / module_at / "extras" / "python"
    module.mkdir(parents=True)
    (module / "ncu_report.py").write_text("")
    return exe


def test_the_module_beside_a_standalone_ncu(tmp_path: Path) -> None:
    exe = install(tmp_path, "nsight-compute/2025.3.1/ncu", "nsight-compute/2025.3.1")
    assert tools.ncu_python(exe) == tmp_path / "nsight-compute/2025.3.1/extras/python"


def test_the_newest_module_of_a_toolkit_whose_bin_ncu_is_a_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "OPT_NVIDIA", tmp_path / "no-opt")
    exe = install(tmp_path, "cuda/bin/ncu", "cuda/nsight-compute-2025.3.1")
    (tmp_path / "cuda/nsight-compute-2024.1.0/extras/python").mkdir(parents=True)
    (tmp_path / "cuda/nsight-compute-2024.1.0/extras/python/ncu_report.py").write_text("")
    assert tools.ncu_python(exe) == tmp_path / "cuda/nsight-compute-2025.3.1/extras/python"
    assert tools.ncu_python(install(tmp_path / "bare", "bin/ncu", "elsewhere")) is None


def test_a_toolkit_script_that_runs_opt_nvidia_s_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = install(tmp_path, "cuda-13.0/bin/ncu", "opt/nvidia/nsight-compute/2025.3.1")
    (tmp_path / "opt/nvidia/nsight-compute/2024.1.0/extras/python").mkdir(parents=True)
    monkeypatch.setattr(tools, "OPT_NVIDIA", tmp_path / "opt/nvidia")
    assert tools.ncu_python(exe) == tmp_path / "opt/nvidia/nsight-compute/2025.3.1/extras/python"


def test_the_ncu_module_goes_on_the_path_only_where_the_package_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = install(tmp_path, "nsight-compute/2025.3.1/ncu", "nsight-compute/2025.3.1")
    where = str(tmp_path / "nsight-compute/2025.3.1/extras/python")
    monkeypatch.setattr(sys, "path", list(sys.path))
    counters.ncu_report_from(exe)
    assert where not in sys.path  # the installed package wins
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ncu_report" else real(name, *a))
    counters.ncu_report_from(exe)
    assert sys.path[-1] == where
    monkeypatch.setenv("KBENCH_NCU", str(exe))  # `kbench analyze`: the ncu found as a live run would find it
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != where])
    counters.ncu_report_from(None)
    assert sys.path[-1] == where


def test_no_module_anywhere_is_one_line_and_exit_7(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capture = tmp_path / CAPTURE.name
    shutil.copy(CAPTURE, capture)
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import fails as where the package is not installed
    with pytest.raises(ToolMissing) as e:
        ncu.kernels(capture)
    assert e.value.exit_code == 7 and "pip install ncu-report==" in str(e.value) and "\n" not in str(e.value)


def test_kbench_analyze_without_ncu_report_or_ncu_says_so(tmp_path: Path) -> None:
    script = (
        "import sys; sys.modules['ncu_report'] = None\n"
        "from kbench.cli import entry\n"
        f"entry.main(['analyze', {str(CAPTURE)!r}, '--out', {str(tmp_path / 'out')!r}])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("KBENCH_NCU", "CUDA_HOME")}
    env.update(PATH=str(tmp_path), CUDA_HOME=str(tmp_path / "no-cuda"))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 7, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "ncu_report" in done.stderr
