"""Two tiers: tests marked `gpu` need CUDA and skip cleanly without it; everything else runs on a CPU.

Without CUDA, Triton's interpreter is switched on here, before any kernel module is imported
(triton.jit decides at decoration time), so kernels run on CPU tensors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"

DATA = Path(__file__).parent / "data"
CHECKER = Path(__file__).parent / "contract" / "check_report.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (gpu tier)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def never_lock_clocks(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test locks a real GPU's clocks (the GPU tier runs on shared machines) or touches the machine's shared
    lock and state folder; the tests of locking pass a stand-in clock control explicitly."""
    monkeypatch.setenv("KBENCH_LOCK_CLOCKS", "0")
    monkeypatch.setenv("KBENCH_RESIDENT", "0")  # no test's command leaves a resident kbench behind (test_resident's do)
    monkeypatch.setenv("KBENCH_STATE_DIR", str(tmp_path_factory.mktemp("kbench-state")))
    # autotune entries never land in the checkout (`isolated` narrows it further)
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kbench-cache"))


@pytest.fixture(autouse=True)
def interpreter_patches_contained() -> Iterator[None]:
    """Each test leaves triton.language as it found it: Triton's interpreter leaves its language patches behind after
    a kernel's @jit helper calls (kbench's check regions put them back, kbench.capture.gluon; tests that run
    interpreted kernels outside one would leave them for a later test's Gluon compile)."""
    from kbench.capture.gluon import language_now, restore_language

    state = language_now()
    yield
    restore_language(state)


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in a fresh folder with its own autotune cache, so tests never touch the user's out/ or .cache/."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(tmp_path / ".cache"))
    return tmp_path


def contract_problems(report: Path) -> list[str]:
    """What the contract checker (shared/tools/check_report.py, copied unchanged) finds wrong with a report."""
    from tests.contract import check_report

    problems: list[str] = check_report.check(report.read_text())
    return problems


@dataclass(frozen=True)
class Ran:
    """A CLI command run in this process: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """Run `kbench ...` (module "kbench") or `python -m kbench.kernel ...` (module "kbench.kernel") in this
    process, as its console entry point would: the exit code, stdout and stderr."""

    def run(*args: str, module: str = "kbench") -> Ran:
        from kbench.cli import app, kernel

        entry = app.main if module == "kbench" else kernel.main
        capsys.readouterr()
        try:
            entry(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def pytest_report_header(config: pytest.Config) -> str:
    """The torch/Triton pair the run tests (README's table of tested pairs)."""
    import torch
    import triton

    cuda = torch.version.cuda or "none (CPU build)"
    return f"kbench: torch {torch.__version__}, triton {triton.__version__}, CUDA {cuda}, GPU {HAS_CUDA}"
