"""GPU tier: the intra-kernel record API and intra mode on a real CUDA device, and proton mode's PC sampling (in
a process of its own: a second CUPTI user in one process fails). Skipped without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench.report.mode_sections import ModeSections
from tests.conftest import contract_problems

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]


def test_records_on_the_gpu_carry_real_sms_and_a_steady_clock(tmp_path: Path) -> None:
    import torch

    from kbench.capture import intra as ic
    from tests.intra_interp import two_tasks

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.zeros(2 * sms, device="cuda")
    with ic.ProfilerBuffer(1 << 12, tmp_path / "t", ["load", "store"], kernel="two_tasks") as buf:
        two_tasks[(2 * sms,)](x, buf, True)
    assert x.tolist() == [1.0] * (2 * sms)
    d = ic.read(buf, ["load", "store"])
    assert (d.ctas, d.recorded_ctas, d.dropped, d.unpaired) == (2 * sms, 2 * sms, 0, 0)
    assert {r.sm for r in d.records} <= set(range(sms)) and len({r.sm for r in d.records}) > 1
    assert all(0.0 <= r.start_us <= r.end_us < 1e4 for r in d.records)
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["otherData"]["timer_step_ns"] == d.step_ns >= 1 and trace["otherData"]["ctas"] == 2 * sms
    small = ic.alloc_profiler_buffer(3 * 4)  # 4 CTAs get 3 slots: 2 of their 4 records
    two_tasks[(4,)](x, small, True)
    assert ic.read(small, ["load", "store"]).dropped == 8


def test_intra_mode_on_the_shipped_matmul(isolated: Path) -> None:
    from kbench.api import intra_profile_plan
    from kbench.plan.discovery import load_version

    plan = load_version("matmul", "base").from_values({"m": 1024, "n": 1024, "k": 1024})
    r = intra_profile_plan(plan, out_dir="prof", bench_runs=20)
    run = Path(r.out_dir)
    assert contract_problems(run / "report.md") == []
    assert isinstance(r.sections, ModeSections)
    section = r.sections.intra
    assert section is not None
    [mm] = section.stages
    assert mm.analysis is not None and mm.analysis.ctas == 64 and mm.same_output is True and mm.dropped_records == 0
    assert mm.overhead_pct is not None and abs(mm.overhead_pct) < 25.0
    assert (run / "intra-mm.json").is_file() and "## Inside the kernel" in r.report_md


def test_proton_pc_sampling_on_the_shipped_matmul(tmp_path: Path) -> None:
    path = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "KBENCH_LOCK_CLOCKS": "0", "PYTHONPATH": path}
    argv = [sys.executable, "-m", "kbench.kernel", "matmul", "base", "--m=1024", "--n=1024", "--k=1024"]
    argv += ["--prof_type=proton", "--pc-sampling", "--bench-runs=10", "--out", str(tmp_path / "p")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    [report] = (tmp_path / "p").rglob("report.md")
    text = report.read_text()
    assert contract_problems(report) == [] and "## PC sampling" in text
    assert "_triton.py:" in text  # samples mapped to source lines: the kernel reloaded inside the session
