"""A stage's two times in one report (issue 50): the Kernels table (event mode: the census; nsys: the kernels' own
GPU time) and the Duration (CUPTI timing; nsys: the span) agree within the range of the Duration's repetitions, or a
line names the stage and says why they differ. On a real H100 event run replayed (MLA decode v6, s=1: the combine's
census 2.66 us against its flushed 5.02 us) and the real nsys capture of fork_join."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kbench.analysis.kernels import StageKernel, StageKernels
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats
from kbench.report import kernel_times
from tests import example_reports as ex
from tests.conftest import DATA, Ran
from tests.test_sampling import _profiled


def test_an_event_runs_census_times_say_why_they_differ_from_the_duration(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _profiled("event-mla_decode-v6-s1", None, monkeypatch)
    text = (Path(r.out_dir) / "report.md").read_text()
    assert ex.disagreeing(text) == []
    said = text.split(ex.KERNEL_TIMES, 1)[1].split("\n\n", 1)[0]
    assert (
        "- combine: its kernels above sum to 2.66 us against the 5.02 us Duration (4.80-5.50 us over its 100 " in said
    )
    assert "without the L2 flush (and the rest, on unlocked clocks) each of the Duration's repetitions" in said
    kernels = json.loads((Path(r.out_dir) / "report.json").read_text())["sections"]["kernels"]
    combine = next(k for k in kernels if k["stage"] == "combine")
    assert combine["against_duration"].startswith("combine: its kernels above sum to 2.66 us")


def test_nsys_stages_whose_kernels_agree_get_no_line(cli: Callable[..., Ran], isolated: Path) -> None:
    done = cli("analyze", str(DATA / "kbench_h100" / "nsys_fork_join.sqlite"), "--out", "out", "--plan", "fork_join")
    assert done.returncode == 0, done.stderr
    text = next(Path("out").rglob("report.md")).read_text()
    assert ex.disagreeing(text) == [] and ex.KERNEL_TIMES not in text  # each kernel spans its stage


def test_an_nsys_stage_spanning_more_than_its_kernels_says_so() -> None:
    # issue 42's nsys run of splitk serial_combine (docs/examples): rowsum spans 110.02 us, its kernels 108.84 us
    timing = TimingStats.of([110.02])
    stage = StageFigures(name="rowsum", precision="fp32", flops=None, dram_bytes=None, timing=timing,
                         duration_us=110.02, tflops=None, gbps=None, intensity=None)  # fmt: skip
    kernels = StageKernels(
        stage="rowsum",
        kernels=[
            StageKernel(name="partial_kernel", launches=1, us=61.0),
            StageKernel(name="combine", launches=1, us=47.84),
        ],
    )
    line = kernel_times.differs(kernels, stage, "nsys")
    assert line == (
        "rowsum: its kernels above sum to 108.84 us against the 110.02 us Duration: the table sums the kernels' own "
        "GPU time, the Duration spans its first kernel's start to its last one's end (the gaps between them counted, "
        "kernels overlapping one another counted once)"
    )
    agreeing = kernels.model_copy(update={"kernels": [StageKernel(name="k", launches=1, us=110.02)]})
    assert kernel_times.differs(agreeing, stage, "nsys") is None
