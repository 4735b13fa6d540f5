"""GPU tier: the loop SKILL.md teaches, served by one resident kbench: event -> annotation -> event (another plan),
three times over. The resident crashed in that loop (exit 5, a segfault in libstdc++ after the driver's
pSmIssueThrottleCtrl assertion) once an annotation command had loaded Nsight Compute's libnvperf_host.so into it and
a later event run handed it to CUPTI (kbench.metric_libraries). Every command must pass, every event run sample,
and the resident hold no copy of the metric library but CUPTI's own beside Nsight Compute's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbench import metric_libraries

pytestmark = pytest.mark.gpu

LOOP = [
    ["vector_add", "--n=16777216", "--prof_type=event"],
    ["vector_add", "--n=16777216", "--prof_type=annotation"],
    ["matmul", "--m=2048", "--n=2048", "--k=2048", "--prof_type=event"],
]


def test_the_skill_loop_in_one_resident_samples_and_never_crashes(tmp_path: Path) -> None:
    if shutil.which("ncu") is None:
        pytest.skip("annotation mode needs ncu on PATH")
    cupti = metric_libraries.cupti_dir()
    if cupti is None:
        pytest.skip("event mode's counters need cupti-python (pip install 'kbench[cupti]')")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "KBENCH_RESIDENT": "1", "XDG_RUNTIME_DIR": str(runtime), "KBENCH_LOCK_CLOCKS": "0"}
    where = runtime / "kbench"
    out = tmp_path / "out"

    def kernel(args: list[str]) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "kbench.kernel", *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)

    first = kernel(["--list"])  # starts the resident; the loop below is all served by it
    assert first.returncode == 0, first.stderr
    deadline = time.monotonic() + 60
    while not (where / "resident-all.sock").exists():
        assert time.monotonic() < deadline, "no resident started"
        time.sleep(0.1)
    try:
        pid = int((where / "resident-all.pid").read_text())
        for _ in range(3):
            for args in LOOP:
                done = kernel([*args, f"--out={out}"])
                assert done.returncode == 0, f"{args}: exit {done.returncode}: {done.stderr[-2000:]}"
                if "--prof_type=event" in args:
                    runs = sorted(out.glob(f"event/{args[0]}/*/*/samples.json"), key=lambda p: p.stat().st_mtime)
                    sampled = json.loads(runs[-1].read_text())
                    assert "sampler" in sampled, sampled.get("not_available")
        assert int((where / "resident-all.pid").read_text()) == pid  # the same resident served every command
        maps = Path(f"/proc/{pid}/maps").read_text()
        loaded = metric_libraries.mapped(maps)
        assert cupti / "libnvperf_host.so" in loaded
        assert metric_libraries.plan(loaded, cupti, list(metric_libraries.NAMES))[1] is None
        log = (where / "resident-all.log").read_text()
        assert log.count("served: ") == 3 * len(LOOP) and "Fatal Python error" not in log
    finally:
        subprocess.run([sys.executable, "-m", "kbench.kernel", "--resident-stop"], env=env, timeout=60)
