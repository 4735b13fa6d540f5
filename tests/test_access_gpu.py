"""GPU tier: access mode then event mode on one GPU machine, the same --out: the event run reads the access run's
predictions (the same source), keeps them beside its capture (predicted.json) and names the naive transpose's
uncoalesced line, which event mode cannot measure. Both runs in processes of their own (the access child sets
TRITON_INTERPRET; the event run must not inherit it). Skipped without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, contract_problems

pytestmark = pytest.mark.gpu


def test_event_mode_names_what_the_access_run_predicted(isolated: Path) -> None:
    env = {**os.environ, "KBENCH_RESIDENT": "0", "KBENCH_LOCK_CLOCKS": os.environ.get("KBENCH_LOCK_CLOCKS", "0")}
    env.pop("TRITON_INTERPRET", None)
    base = [sys.executable, "-m", "kbench.kernel", "transpose", "naive", "--rows=2048", "--cols=2048",
            "--kernel-path", str(DATA / "validation"), "--out", str(isolated / "out")]  # fmt: skip
    for mode in ("access", "event"):
        done = subprocess.run([*base, f"--prof_type={mode}"], capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr
    (run,) = (isolated / "out" / "event").glob("transpose/*/*")
    assert contract_problems(run / "report.md") == []
    read = json.loads((run / "predicted.json").read_text())
    (access_run,) = (isolated / "out" / "access").glob("transpose/*/*")
    assert read["from"] == str(access_run) and read["stages"]["transpose"]["ld_use"] == 4.0
    first = next(x for x in (run / "report.md").read_text().splitlines() if x.startswith("1. "))
    assert first.startswith("1. Uncoalesced global loads in transpose: 4.0 of every 32 bytes they fetch are used "
                            "(predicted on CPU at rows=2048, cols=2048")  # fmt: skip
    assert "worst line naive.py:20" in first
