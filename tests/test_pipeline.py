"""The pipeline with a backend that lives in this test, not in the package: registered with one call, it runs a
plan through prepare -> capture -> analyse -> write to a contract-valid report, analyses its own captures
offline through `kbench analyze`, and is a `--prof_type` like the built-in modes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbench import pipeline
from kbench.analysis.devices import resolve
from kbench.analysis.figures import from_timings
from kbench.analysis.roofline import bound_us
from kbench.analysis.timing_stats import TimingStats
from kbench.errors import UsageError
from kbench.modes import registry
from kbench.modes.base import Analysis, Capture, Context, Job, RunOptions
from kbench.plan.discovery import load_version
from kbench.report.models import ProfileResult
from kbench.report.sections import Sections
from tests.conftest import contract_problems
from tests.pipeline_fakes import offline_gpu


class Replay:
    """A mode that 'measures' each stage at a fixed share of its roofline bound: the smallest backend there is."""

    name = "replay"
    options: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = (".replay",)
    describes = "replayed timings (.replay)"
    offline_key = "capture"
    default_bench_runs = 3
    in_process = True
    needs_gpu = True

    def tools(self, opts: RunOptions) -> dict[str, Any]:
        return {"versions": {"replay": "1.0"}}

    def capture(self, job: Job) -> Capture:
        assert job.device.spec is not None
        ceilings = job.device.ceilings()
        with job.env.sampled():  # each stage at twice its roofline bound, three times
            samples = {
                s.name: [2.0 * bound_us(ceilings[s.precision], s.flops, s.dram_bytes)] * 3
                for s in job.plan.checked_stages()
            }
        path = job.run_dir / "samples.replay"
        path.write_text(json.dumps(samples))
        return Capture(files={"samples": path}, check="PASS: replayed", facts={"runs": job.opts.bench_runs})

    def open(self, path: Path) -> Capture:
        return Capture(files={"samples": path}, live=False)

    def analyse(self, capture: Capture, ctx: Context) -> Analysis:
        assert ctx.plan is not None
        device = ctx.device or resolve(ctx.table, "NVIDIA H100 80GB HBM3")
        assert device.spec is not None
        samples = json.loads(capture.files["samples"].read_text())
        timings = {name: TimingStats.of(us) for name, us in samples.items()}
        figures = from_timings(
            ctx.plan.checked_stages(), timings, device.ceilings(), roofline_known=True, device_name=device.name
        )
        return Analysis(device=device, figures=figures, timing_method="replayed samples", sections=Sections())

    def write(self, analysis: Analysis, result: ProfileResult, run_dir: Path) -> None:
        (run_dir / "replay.txt").write_text(f"{result.kernel}: {len(result.stages)} stage(s)\n")


@pytest.fixture
def replay_mode(monkeypatch: pytest.MonkeyPatch, isolated: Path) -> Iterator[Replay]:
    offline_gpu(monkeypatch)
    backend = Replay()
    registry.register(backend)
    try:
        yield backend
    finally:
        registry.unregister(backend.name)


def test_a_backend_from_outside_runs_the_whole_pipeline(replay_mode: Replay) -> None:
    plan = load_version("matmul").from_values({})
    r = pipeline.profile("replay", plan, RunOptions(out_root=Path("out"), progress=lambda m: None))
    run = Path(r.out_dir)
    assert run.parts[-5:-1] == ("out", "replay", "matmul", plan.slug())
    assert contract_problems(run / "report.md") == []
    assert {p.name for p in run.iterdir()} == {
        "params.json",
        "samples.replay",
        "replay.txt",
        "result.json",
        "report.json",
        "report.md",
        "distance.png",  # the stage's distance to its roof, step by step (issue 51)
    }
    assert r.check == "PASS: replayed" and r.sections == Sections() and r.stage("mm").efficiency_pct == 50.0
    params = json.loads((run / "params.json").read_text())
    assert params["status"] == "ok" and params["tools"]["replay"] == "1.0" and params["clocks"].startswith("not locked")
    assert "## Timing" not in r.report_md and "## Counters" not in r.report_md  # no section it did not make


def test_its_captures_are_analysed_offline(replay_mode: Replay, cli) -> None:
    plan = load_version("matmul").from_values({})
    live = pipeline.profile("replay", plan, RunOptions(out_root=Path("out"), progress=lambda m: None))
    done = cli("analyze", str(Path(live.out_dir) / "samples.replay"), "--plan", "matmul", "--out", "again")
    assert done.returncode == 0, done.stderr
    (report,) = Path("again/replay/matmul").glob("*/*/report.md")
    assert contract_problems(report) == [] and "n/a: analysis of an existing capture" in report.read_text()
    assert ProfileResult.model_validate_json((report.parent / "result.json").read_text()).offline


def test_it_is_a_prof_type_and_takes_no_option_it_does_not_declare(replay_mode: Replay, cli) -> None:
    assert "replay" in registry.names()
    done = cli("vector_add", "--prof_type=replay", "--cuda-graph", module="kbench.kernel")
    assert done.returncode == 2 and "--cuda-graph applies to --prof_type=event only" in done.stderr
    done = cli("vector_add", "--prof_type=replay", "--out", "cli", module="kbench.kernel")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Profile: vector_add base")


def test_unknown_modes_and_captures_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown mode perf; choose one of annotation, event, ncu, nsys"):
        registry.get("perf")
    with pytest.raises(UsageError, match=r"kbench analyze reads Nsight Compute reports \(\.ncu-rep\); nsys .*; Proton"):
        registry.for_capture(tmp_path / "x.txt", None)
    with pytest.raises(UsageError, match=r"--mode=event reads no capture file; a \.ncu-rep capture is analysed as"):
        registry.for_capture(tmp_path / "x.ncu-rep", "event")
    with pytest.raises(UsageError, match="no such capture file"):
        pipeline.analyze(tmp_path / "missing.ncu-rep", None, tmp_path, None)


def test_mode_sections_names_exactly_the_fields_mode_sections_adds() -> None:
    """ProfileResult picks ModeSections for a result.json by MODE_SECTIONS without importing it: the two must agree."""
    from kbench.report.mode_sections import ModeSections
    from kbench.report.sections import MODE_SECTIONS

    assert set(ModeSections.model_fields) - set(Sections.model_fields) == set(MODE_SECTIONS)
