"""Intra mode on a CPU: the pipeline with its GPU-facing calls replaced (tests/pipeline_fakes) and the capture's
measurement replaced by a record and its trace; the report's section, the measured idle tail in Top 3, and the
refusal of a plan whose stages record nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kbench import pipeline
from kbench.analysis import intra
from kbench.capture import intra as ic
from kbench.errors import UsageError
from kbench.modes.base import RunOptions
from kbench.plan.discovery import load_version
from tests.conftest import contract_problems
from tests.pipeline_fakes import offline_gpu

MM = {"m": 4096, "n": 4096, "k": 4096}


def records(ctas: int, sms: int, cta_us: float) -> list[intra.Record]:
    """CTAs dealt to SMs in waves, each a mainloop then a store: the last wave leaves SMs idle."""
    out = []
    for c in range(ctas):
        sm, wave = c % sms, c // sms
        t0 = wave * cta_us
        out += [
            intra.Record(c, sm, 0, "mainloop", t0, t0 + 0.95 * cta_us),
            intra.Record(c, sm, 0, "store", t0 + 0.95 * cta_us, t0 + cta_us),
        ]
    return out


def replayed(trace: dict[str, Any], plain: float, recording: float) -> Any:
    def measure(prep: Any, reps: int, run_dir: Path, progress: Any, rest_x: float) -> dict[str, Any]:
        (run_dir / "intra-mm.json").write_text(json.dumps(trace))
        return {
            "reps": reps,
            "flush": "L2 flushed by reading 100 MiB (no dirty lines left)",
            "stages": {
                "mm": {
                    "plain_us": [plain] * reps,
                    "instrumented_us": [recording] * reps,
                    "method": "CUDA events, eager launches, L2 flushed before each",
                    "tasks": ["mainloop", "store"],
                    "trace": "intra-mm.json",
                    "slots": 1 << 20,
                    "overflows": [],
                    "same_output": True,
                }
            },
        }

    return measure


def test_the_report_shows_inside_the_kernel_and_the_measured_tail(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline_gpu(monkeypatch)
    # 140 CTAs on 132 SMs: a full wave, then 8 CTAs while 124 SMs idle
    found = records(140, 132, 50.0)
    trace = intra.chrome_trace(found, "mm_kernel", {"dropped_records": 0, "unpaired_records": 0, "timer_step_ns": 32})
    monkeypatch.setattr(ic, "measure", replayed(trace, 200.0, 202.0))
    plan = load_version("matmul", "v2").from_values(MM)
    r = pipeline.profile("intra", plan, RunOptions(out_root=Path("out"), check=False, progress=lambda m: None))
    run = Path(r.out_dir)
    text = (run / "report.md").read_text()
    assert contract_problems(run / "report.md") == []
    assert "## Inside the kernel" in text
    assert "| mm | mainloop, store | 200.00 | 202.00 | +1.0% | 140 | 132 | 32 |" in text
    a = intra.analyse(found, 132)
    assert a.ctas_per_sm.max_us == 2 and a.unused_sms == 0
    # 124 of 132 SMs idle for the second of 2 waves
    assert a.tail_idle_pct == pytest.approx(100 * 124 / 132 / 2)
    tail = [o for o in r.figures.opportunities if o.metric == "mm.tail_idle_pct"]
    assert tail and tail[0].value == f"{a.tail_idle_pct:.1f}%" and "(measured)" in tail[0].name
    assert any("recording the tasks of mm cost +1.0%" in n for n in r.notes)


def test_a_plan_that_records_no_tasks_is_refused(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    offline_gpu(monkeypatch)
    plan = load_version("vector_add", "base").from_values({})
    with pytest.raises(UsageError, match="no stage records tasks"):
        pipeline.profile("intra", plan, RunOptions(out_root=Path("out"), progress=lambda m: None))


def test_the_h100_record_of_the_shipped_matmul_makes_a_contract_report(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lzma

    from tests.conftest import DATA

    h100 = DATA / "intra_h100"
    record = json.loads((h100 / "v2_intra.json").read_text())
    trace = lzma.decompress((h100 / "v2_intra-mm.json.xz").read_bytes()).decode()

    def measure(prep: Any, reps: int, run_dir: Path, progress: Any, rest_x: float) -> dict[str, Any]:
        (run_dir / "intra-mm.json").write_text(trace)
        return dict(record)

    offline_gpu(monkeypatch)
    monkeypatch.setattr(ic, "measure", measure)
    plan = load_version("matmul", "v2").from_values(MM)
    r = pipeline.profile("intra", plan, RunOptions(out_root=Path("out"), check=False, progress=lambda m: None))
    text = (Path(r.out_dir) / "report.md").read_text()
    assert contract_problems(Path(r.out_dir) / "report.md") == []
    assert "### mm: 512 CTAs on 132 SMs" in text and "CTAs per SM: 3 to 4" in text
    assert any("recording the tasks of mm cost +12.0%" in n for n in r.notes)  # that run's loops, not interleaved
