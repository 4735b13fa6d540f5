"""What every fault case asserts: the exit code, one line on stderr naming the problem, no traceback, and the
profiles made before it byte-identical (an earlier run folder, made here by a real analysis of an H100 capture)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import DATA

CAPTURE = DATA / "kbench_h100" / "annotation_matmul_base.ncu-rep"


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its content hash and mode."""
    return {
        str(p.relative_to(root)): f"{hashlib.sha256(p.read_bytes()).hexdigest()} {oct(p.stat().st_mode)}"
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str


def kbench(
    *args: str,
    module: str = "kbench",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    preexec_fn: Callable[[], object] | None = None,
) -> Done:
    """kbench as a user runs it: its own process."""
    p = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        preexec_fn=preexec_fn,
    )
    return Done(p.returncode, p.stdout, p.stderr)


def one_line(stderr: str, fragment: str) -> None:
    """The error is one line, starts as kbench's do, says ``fragment``, and carries no traceback."""
    lines = [line for line in stderr.strip().splitlines() if line.startswith("kbench: error:")]
    assert len(lines) == 1, stderr
    assert fragment in lines[0], stderr
    assert "Traceback" not in stderr, stderr


def earlier_run(root: Path) -> Path:
    """A finished profile under ``root`` (an annotation-mode analysis of a committed capture)."""
    done = kbench("analyze", str(CAPTURE), "--plan", "matmul", "--out", str(root))
    assert done.code == 0, done.stderr
    return next(root.rglob("report.md")).parent
