"""How the profiled child ends: at once (os._exit, no interpreter or CUDA teardown) after ncu's program and the
PyTorch profiler's, orderly under Nsight Systems (which collects its buffers at exit), and with its one error line
and exit code when the plan fails."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kbench.capture import child
from kbench.errors import KernelError


class LeftAtOnce(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: dict[str, Any], outcome: Any) -> str:
    """'at once <code>' or 'orderly <code>' for a child whose main returns (or raises) ``outcome``."""
    spec = tmp_path / child.SPEC
    spec.write_text(json.dumps(program))

    def main(path: str) -> int:
        assert path == str(spec)
        if isinstance(outcome, Exception):
            raise outcome
        return int(outcome)

    def leave(code: int) -> None:
        raise LeftAtOnce(code)

    monkeypatch.setattr(child, "main", main)
    monkeypatch.setattr(os, "_exit", leave)
    try:
        child.run(str(spec))
    except LeftAtOnce as e:
        return f"at once {e.code}"
    except SystemExit as e:
        return f"orderly {e.code}"
    raise AssertionError("the child did not end")


def test_ncu_and_torch_profiler_children_leave_at_once_nsys_ones_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _end(tmp_path, monkeypatch, {}, 0) == "at once 0"  # ncu: each stage once
    assert _end(tmp_path, monkeypatch, {"program": "timeline", "backend": "torch"}, 0) == "at once 0"
    assert _end(tmp_path, monkeypatch, {"program": "timeline", "backend": "nsys"}, 0) == "orderly 0"


def test_a_failed_child_exits_with_its_code_and_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _end(tmp_path, monkeypatch, {}, 5) == "orderly 5"  # the check failed: main said so and returned 5
    error = KernelError("stage add failed: RuntimeError: boom")
    assert _end(tmp_path, monkeypatch, {}, error) == f"orderly {error.exit_code}"
    assert capsys.readouterr().err == f"{child.PREFIX}stage add failed: RuntimeError: boom\n"
