"""PM sampling in event mode: placing real H100 samples on the kernel records' clock and reducing them
(kbench.analysis.sampling), and the fallbacks when nothing can sample."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kbench.analysis import sampling as S
from kbench.capture import sampling as capture

DATA = Path(__file__).parent / "data" / "pm_sampling_h100"


def _probe() -> dict[str, Any]:
    found: dict[str, Any] = json.loads((DATA / "probe.json").read_text())
    return found


def _record(probe: dict[str, Any], shift_ns: int = 0) -> dict[str, Any]:
    """The probe's run as a round record: one repetition, no flush and no gap (the items are all the run's)."""
    clocks = probe["clocks_in"]
    return {
        "interval_ns": probe["interval_ns"],
        "anchors": [[clocks["cupti_ns"], clocks["time_ns"] + shift_ns, 1_000]],
        "samples": probe["samples"],
        "metrics": probe["metrics"],
        "items": probe["items"],
    }


def _ncu(metric: str, kernel: str) -> list[float]:
    """ncu's replayed values of ``metric`` on the probe's kernels named ``kernel`` (the same workload, run alone)."""
    lines = (DATA / "ncu-probe-workload.csv").read_text().splitlines()
    rows = csv.DictReader(line for line in lines if line.startswith('"'))
    return [float(r["Metric Value"]) for r in rows if r["Metric Name"] == metric and kernel in r["Kernel Name"]]


def _group(record: dict[str, Any], key: str) -> tuple[dict[str, float], float]:
    samples, _ = S._place(record)
    items = S._items(record)
    col = record["metrics"].index(S.WANTED["gpu_busy_pct"])
    shift = S.refine(samples, S._Busy([(s, e) for _, s, e in items]), col)
    samples = [(a + shift, b + shift, v) for a, b, v in samples]
    busy = S._Busy([(s, e) for n, s, e in items if S.GAP not in n])
    own = S._Busy([(s, e) for n, s, e in items if key in n])
    return S._reduce(samples, record["metrics"], own, busy, float(record["interval_ns"]))


def test_samples_are_placed_by_their_spacing_and_the_clock_pair() -> None:
    """With the profiler on, CUPTI's clock runs at the TSC's 2.1 ticks per ns: the samples' spacing says so."""
    record = _record(_probe())
    samples, rate = S._place(record)
    assert rate == pytest.approx(2.1, abs=0.01)
    assert len(samples) == len(record["samples"]) - 1  # the first sample's start is not recorded
    widths = {round(b - a) for a, b, _ in samples}
    assert widths <= {19_999, 20_000, 20_001}  # 20 us of GPU time each, on the records' clock


def test_the_gemm_tensor_pipe_agrees_with_ncu_replaying_the_same_kernel() -> None:
    """The three bf16 GEMMs (nvjet): sampled tensor-pipe % against ncu's replayed value of the same metric."""
    figures, n = _group(_record(_probe()), "nvjet")
    replayed = _ncu("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "nvjet")
    assert len(replayed) == 3 and n > 150  # ~4.1 ms of GEMM at 20 us
    assert figures["tc_pct"] == pytest.approx(sum(replayed) / 3, abs=2.0)
    assert 25.0 < figures["dram_pct"] < 40.0  # a compute-bound GEMM: DRAM far from its roof
    assert 90.0 < figures["sm_busy_pct"] <= 100.0


def test_the_copy_reads_at_the_dram_roof_with_no_tensor_work() -> None:
    figures, n = _group(_record(_probe()), "Memcpy")
    assert n > 60  # two 0.71-ms copies
    assert figures["dram_pct"] > 85.0 and figures["tc_pct"] == 0.0


def test_the_busy_fit_recovers_a_wrong_clock_pair() -> None:
    """A clock pair 30 us off: the GPU-busy metric against the records' busy time moves the samples back."""
    record = _record(_probe(), shift_ns=30_000)
    samples, _ = S._place(record)
    items = S._items(record)
    col = record["metrics"].index(S.WANTED["gpu_busy_pct"])
    shift = S.refine(samples, S._Busy([(s, e) for _, s, e in items]), col)
    assert shift == pytest.approx(-30_000, abs=3_000)
    assert S.refine(samples, S._Busy([(s, e) for _, s, e in items]), None) == 0.0  # no busy metric: no refinement


def _round(reps: int = 3, flush: int = 1, stage: int = 2, us: float = 100.0) -> dict[str, Any]:
    """A synthetic round: each repetition a flush, a gap spin and the stage's kernels, then one more gap; a sample
    every 20 us whose DRAM% is 80 inside the stage's kernels, 50 inside the flush, 0 elsewhere."""
    items: list[list[Any]] = []
    t = 1_000_000
    for _ in range(reps):
        for _ in range(flush):
            items.append(["flush_kernel", t, 200_000])
            t += 200_000
        items.append(["at::cuda::spin_kernel(long)", t, 40_000])
        t += 40_000
        for k in range(stage):
            items.append([f"k{k}", t, int(us * 1e3)])
            t += int(us * 1e3)
    items.append(["at::cuda::spin_kernel(long)", t, 40_000])
    end = t + 40_000
    spans = [(s, s + d, n) for n, s, d in items]

    def value(a: int) -> float:
        for s, e, n in spans:
            if s <= a < e:
                return 0.0 if "spin" in n else 50.0 if n == "flush_kernel" else 80.0
        return 0.0

    samples = [[0, 1_000_000, [0.0]]] + [
        [a, a + 20_000, [value(a + 10_000)]] for a in range(1_000_000, end - 20_000, 20_000)
    ]
    return {
        "reps": reps,
        "flush_items": flush,
        "gap_items": 1,
        "interval_ns": 20_000,
        "metrics": [S.WANTED["dram_pct"]],
        "anchors": [[0, 0, 5]],
        "samples": samples,
        "items": items,
    }


def test_a_round_gives_the_stage_and_each_kernel_its_own_figures() -> None:
    got = S.reduce("partial", _round())
    assert isinstance(got, S.SampledStage)
    assert got.figures["dram_pct"] == pytest.approx(80.0, abs=0.5)  # the flush's 50% never leaks in
    assert got.samples == pytest.approx(3 * 2 * 100 / 20, abs=0.5)
    assert sorted(k.name for k in got.kernels) == ["k0", "k1"]
    assert all(k.figures["dram_pct"] == pytest.approx(80.0, abs=1.0) for k in got.kernels)


def test_too_few_samples_give_no_figure_and_say_how_many() -> None:
    got = S.reduce("once", _round(reps=1, stage=1, us=60.0))
    assert isinstance(got, S.SampledStage)
    assert got.figures == {} and got.note is not None and "3.0 samples of 20 us" in got.note
    assert got.samples < S.MIN_SAMPLES


def test_kernels_shorter_than_a_sample_give_no_figure() -> None:
    """Windows mostly idle: their idle traffic would be the stage's (a 5-us combine read 42.7% DRAM, ncu 19.4%)."""
    got = S.reduce("tiny", _round(reps=30, stage=1, us=10.0))
    assert isinstance(got, S.SampledStage) and got.samples >= S.MIN_SAMPLES
    assert got.figures == {} and got.note == (
        "its kernels run 10.0 us per repetition, less than one 20-us sample (--prof_type=annotation measures it)"
    )
    assert [k.figures for k in got.kernels] == [{}]


def test_records_that_do_not_cut_into_repetitions_are_said() -> None:
    record = _round()
    record["items"] = record["items"][:-2]
    got = S.reduce("partial", record)
    assert isinstance(got, str) and "not 3 x" in got


def test_read_says_why_nothing_was_sampled_and_what_was() -> None:
    stages, notes = S.read({"not_available": "cupti-python is not installed (cupti)"})
    assert stages == {} and notes == ["Counters (TC%, DRAM%): n/a in this run: cupti-python is not installed (cupti)"]
    found = {
        "sampler": {"version": "13.4.0", "chip": "GH100", "interval_ns": 20_000, "metrics": {"dram_pct": "dram__x"}},
        "stages": {"partial": _round(), "tiny": _round(stage=1, us=10.0), "gone": {"not_measured": "why"}},
    }
    stages, notes = S.read(found)
    assert list(stages) == ["partial", "tiny"]
    assert notes[0].startswith("Counters (TC%, DRAM%) sampled in-process by CUPTI PM sampling (cupti-python 13.4.0")
    assert "DRAM% dram__x" in notes[0] and "TC% not sampled" in notes[0]
    assert any(n.startswith("Counters of gone not sampled: why") for n in notes)
    assert any(n.startswith("Counters of tiny not given:") for n in notes)


def test_evidence_for_the_catalogue() -> None:
    got = S.reduce("partial", _round())
    assert isinstance(got, S.SampledStage)
    got = got.model_copy(update={"figures": {**got.figures, "sm_busy_pct": 70.0, "xu_pct": 12.0, "issue_pct": 50.0}})
    e = S.evidence(got, 132, 1980.0, 100.0, 4)
    assert e["sm_busy_pct"] == 70.0 and e["pipes"] == {"xu": 12.0}
    assert e["sm_cycles"] == pytest.approx(132 * 1980.0 * 100.0)
    assert e["issued"] / (4 * e["sm_cycles"]) == pytest.approx(0.5)
    assert "issued" not in S.evidence(got, 132, None, 100.0, 4)  # no probed clock: no issue roof


def test_without_a_gpu_or_when_switched_off_sampling_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(capture.OFF, "0")
    assert capture.start() == "PM sampling off (KBENCH_SAMPLING=0)"
    monkeypatch.delenv(capture.OFF)
    for bad, why in (("fast", "is not a number of microseconds"), ("5", "is outside 10 to 1000 us")):
        monkeypatch.setenv(S.INTERVAL_ENV, bad)
        assert capture.start() == f"{S.INTERVAL_ENV}={bad!r} {why}".replace("'5'", "5")
    monkeypatch.setenv(S.INTERVAL_ENV, "50")
    assert capture.interval_ns() == 50_000
    monkeypatch.delenv(S.INTERVAL_ENV)
    assert capture.interval_ns() == 20_000
    got = capture.start()
    assert isinstance(got, str)  # this machine has no GPU (CI), or no cupti-python: one line, never an exception
    assert "\n" not in got


def test_reps_cover_the_window() -> None:
    assert capture.reps_for(10.0, 100) == 100  # 2 ms of a 10-us stage would take 201: capped by the timing's reps
    assert capture.reps_for(1_000.0, 100) == 3
    assert capture.reps_for(100.0, 1_000) == 21
    # what half the hardware buffer holds (164 ms of 20-us samples, 82 ms of 10-us ones): a 100-ms stage once, a
    # 30-ms stage 3 times, twice at 10 us
    assert capture.reps_for(100_000.0, 100) == 1
    assert capture.reps_for(30_000.0, 100) == 3 and capture.reps_for(30_000.0, 100, 10_000) == 2


def _profiled(name: str, kernel_path: list[str] | None, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The recorded H100 run ``name`` replayed through event mode's whole path (its timings, census and sampling
    rounds handed back in stage order), as tests/test_golden.py replays its runs."""
    from kbench import pipeline
    from kbench.modes.base import RunOptions
    from kbench.plan.discovery import load_version
    from tests.pipeline_fakes import offline_gpu, replay

    folder = DATA / name
    params = json.loads((folder / "params.json").read_text())
    plan = load_version(params["kernel"], params["version"], kernel_path).from_values(params["params"])
    offline_gpu(monkeypatch)
    replay(monkeypatch, folder / "timings.json")
    opts = RunOptions(out_root=Path("out"), check=False, progress=lambda msg: None, bench_runs=100)
    return pipeline.profile("event", plan, opts)


def test_a_real_event_run_with_samples_fills_the_stages_table(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MLA decode v6 at s=1 on the H100, sampled: partial (105 us) gets TC% and DRAM% (ncu replayed 83% DRAM);
    combine (5 us, shorter than a sample) gets n/a and the Environment says why."""
    from tests.conftest import contract_problems

    r = _profiled("event-mla_decode-v6-s1", None, monkeypatch)
    partial, combine = r.stage("partial"), r.stage("combine")
    assert partial.dram_pct == pytest.approx(86.8, abs=0.2) and partial.tc_pct == pytest.approx(13.3, abs=0.2)
    assert combine.dram_pct is None and combine.tc_pct is None
    assert any(n.startswith("Counters of combine not given: its kernels run 5.1 us per repetition") for n in r.notes)
    assert partial.issue_roof_pct == pytest.approx(12.1, abs=0.3)  # ncu's issue roof of the same kernel: 12.7%
    run = Path(r.out_dir)
    assert contract_problems(run / "report.md") == []
    text = (run / "report.md").read_text()
    assert "| partial | 104.98 | 13.3 | 86.8 | n/a | Memory |" in text
    assert "| partial | (all) | 104.9 | 13.3 | 86.8 | 12.1 |" in text
    assert "issued: PM sampling's sm__inst_executed_realtime" in text
    report = json.loads((run / "report.json").read_text())
    (stage,) = [s for s in report["stages"] if s["name"] == "partial"]
    assert stage["dram_pct"]["by"].startswith("PM sampling (CUPTI, in-process): dram__throughput.avg.pct_of_peak")
    sampling = report["sections"]["sampling"]
    assert [s["stage"] for s in sampling["stages"]] == ["partial", "combine"]
    assert sampling["sampler"]["chip"] == "GH100" and sampling["sampler"]["sets"] == ["Compute_Triage", "TriageCompute"]
    tc = sampling["sampler"]["metrics"]["tc_pct"]
    assert tc == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
    # no item from the short combine's windows (its 5-us rounds read "SMs idle: 36.5% busy" before the rule)
    assert not any("sm_busy_pct" in o.metric for o in r.figures.opportunities)
    # the run's own samples.json: the sampler and each stage's round, as recorded
    assert json.loads((run / "samples.json").read_text())["sampler"]["chip"] == "GH100"


def test_a_stage_of_two_kernels_gets_each_kernels_figures(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """splitk serial_combine: its partial kernel streams at the DRAM roof, its one-CTA combine barely touches DRAM;
    the stage's 37.6% is their time-weighted mean (ncu, replaying each kernel after a cache flush, read 25.6%: its
    combine re-reads the partials from DRAM and takes 113 us instead of 67)."""
    r = _profiled("event-splitk-serial_combine", [str(Path(__file__).parent / "data" / "validation")], monkeypatch)
    assert r.stage("rowsum").dram_pct == pytest.approx(37.6, abs=0.2)
    assert r.sections.timing is not None and r.sections.timing.sampled is not None
    (s,) = r.sections.timing.sampled
    kernels = {k.name: k for k in s.kernels}
    assert kernels["partial_kernel"].figures["dram_pct"] == pytest.approx(85.9, abs=0.3)
    assert kernels["combine_kernel"].figures["dram_pct"] == pytest.approx(5.2, abs=0.3)
    text = (Path(r.out_dir) / "report.md").read_text()
    assert "| rowsum | partial_kernel |" in text and "| rowsum | combine_kernel |" in text
    # each kernel's DRAM bytes per run: its DRAM% of the 3350-GB/s peak x its CUPTI time; the partial sums read
    # x's 134.2 MB (and write 131 KB of partials): 129 MB sampled
    (ks,) = r.figures.kernels
    moved = {k.short: k.dram_bytes for k in ks.kernels}
    assert moved["partial_kernel"] == pytest.approx(4096 * 8192 * 4, rel=0.05)
    assert moved["combine_kernel"] is not None and moved["combine_kernel"] < 0.15 * 4096 * 8192 * 4
    assert all(k.bytes_by and "3350 GB/s" in k.bytes_by for k in ks.kernels)


class _FakeCollector:
    """cupti-python's pm_sampling.Collector, as far as Sampler.open uses it: ``refuse`` names metrics whose
    configuration fails (ValueError, as the binding raises for a set it refuses), ``deny`` an enable error."""

    refuse: frozenset[str] = frozenset()
    deny: BaseException | None = None
    log: ClassVar[list[str]] = []  # each fake class gets its own (_fake_cupti)

    def __init__(self, device_index: int = 0) -> None:
        self._chip_name = "GH100"

    def enable(self) -> None:
        self.log.append("enable")
        if self.deny is not None:
            raise self.deny

    def configure(self, *, metrics: list[str], hardware_buffer_size: int, sampling_interval: int) -> None:
        self.log.append(f"configure {len(metrics)} @ {sampling_interval} in {hardware_buffer_size >> 20} MB")
        if self.refuse & set(metrics):
            raise ValueError("Requested PM sampling configuration is not supported.")

    def disable(self) -> None:
        self.log.append("disable")


class _FakeHost:
    @staticmethod
    def get_single_pass_sets(chip: str) -> list[str]:
        return ["TriageCompute"]

    @staticmethod
    def get_metrics_in_single_pass_set(chip: str, name: str) -> list[str]:
        return ["FBSP.TriageCompute.dramc__throughput"]


def _fake_cupti(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> type[_FakeCollector]:
    collector = type("Collector", (_FakeCollector,), {"log": [], **kw})
    binding = type("pm_sampling", (), {"Collector": collector})
    monkeypatch.setattr(capture, "_cupti", lambda: (None, binding, _FakeHost))
    monkeypatch.setattr(capture, "_IMAGES", {})
    return collector


def test_open_drops_what_the_chip_refuses_from_the_end_each_try_in_a_collector_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _fake_cupti(monkeypatch, refuse=frozenset({S.WANTED["l2_pct"], S.WANTED["sm_cycles_max"]}))
    got = capture.Sampler.open(0, 20_000)
    assert isinstance(got, capture.Sampler)
    assert got.refused == [S.WANTED["l2_pct"], S.WANTED["sm_cycles_max"]]
    assert list(got.metrics) == list(S.WANTED)[:-2] and got.sets == {
        "TriageCompute": _FakeHost.get_metrics_in_single_pass_set("", "")
    }
    assert fake.log == [
        "enable", "configure 9 @ 20000 in 64 MB", "disable",
        "enable", "configure 8 @ 20000 in 64 MB", "disable",
        "enable", "configure 7 @ 20000 in 64 MB",
    ]  # fmt: skip
    about = got.describe()
    assert (
        about["chip"] == "GH100" and about["interval_ns"] == 20_000 and set(about["seconds"]) == {"enable_s", "open_s"}
    )
    got.close()
    assert fake.log[-1] == "disable" and got.collector is None


def test_open_says_in_one_line_why_nothing_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cupti(monkeypatch, deny=PermissionError("ERR_NVGPUCTRPERM"))
    assert capture.Sampler.open() == (
        "PM sampling not permitted (ERR_NVGPUCTRPERM: the GPU's counters are open to admin users only)"
    )
    _fake_cupti(monkeypatch, deny=RuntimeError("PM sampling is already enabled on this device.\nmore"))
    assert capture.Sampler.open() == (
        "PM sampling unavailable on this GPU: RuntimeError: PM sampling is already enabled on this device."
    )
    fake = _fake_cupti(monkeypatch, refuse=frozenset(S.WANTED.values()))
    got = capture.Sampler.open()
    assert isinstance(got, str) and got.startswith("PM sampling refused every metric on GH100 (ValueError:")
    assert fake.log.count("enable") == len(S.WANTED) and fake.log[-1] == "disable"  # nothing left enabled

    def missing() -> Any:
        raise ImportError("No module named 'cupti'", name="cupti")

    monkeypatch.setattr(capture, "_cupti", missing)
    assert capture.Sampler.open() == "cupti-python is not installed (cupti): README, Counters in event mode, says how"
