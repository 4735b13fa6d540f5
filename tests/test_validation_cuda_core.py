"""The design-distance validation pairs (issue 51) under Triton's CPU interpreter: every version of fdiv, twopass,
persist and gather passes `kbench check` at its check parameters, and the fdiv versions differ in the division the
compiler emits for an H100 (PTX for sm_90, compiled here without a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import HAS_CUDA, Ran

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT / "tests" / "data" / "validation"

VERSIONS = [
    ("fdiv", "before"),
    ("fdiv", "full"),
    ("fdiv", "after"),
    ("twopass", "before"),
    ("twopass", "after"),
    ("persist", "before"),
    ("persist", "after"),
    ("gather", "before"),
    ("gather", "after"),
]


@pytest.mark.slow
@pytest.mark.skipif(HAS_CUDA, reason="CPU interpreter path")
@pytest.mark.parametrize(("package", "version"), VERSIONS)
def test_each_version_passes_its_check_under_the_interpreter(
    cli: Callable[..., Ran], package: str, version: str
) -> None:
    done = cli("check", package, version, "--kernel-path", str(VALIDATION))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on cpu (Triton interpreter, TRITON_INTERPRET=1)" in done.stdout
    assert "PASS: relative L2 error" in done.stdout and "FAIL" not in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(HAS_CUDA, reason="CPU interpreter path")
def test_the_persistent_grid_covers_every_row_when_programs_take_several_pairs(cli: Callable[..., Ran]) -> None:
    # two programs without CUDA: 9 rows are pairs (0, 8) (1, 7) (2, 6) (3, 5) and the middle row 4 alone
    done = cli("check", "persist", "after", "--kernel-path", str(VALIDATION), "--rows=9")
    assert done.returncode == 0 and "PASS" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_the_fdiv_versions_compile_to_the_divisions_their_docstrings_name() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "validation_compile.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if "error" in found:
        pytest.skip(f"Triton cannot compile for sm_90 on this machine: {found['error']}")
    # before: the IEEE division by name (Triton's `/` gives div.full.f32); after: an approximate reciprocal square root
    assert found == {"rn": ["div.rn.f32"], "full": ["div.full.f32"], "rsqrt": ["rsqrt.approx.ftz.f32"]}
