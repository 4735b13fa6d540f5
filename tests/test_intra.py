"""The intra-kernel analysis on Proton's instrumentation trace captured on an H100 (tests/data/proton_h100: a
512^3 bf16 tiled matmul, 16 CTAs of 8 warps, load / mma / store scopes around its K loop)."""

from __future__ import annotations

import json
import lzma

import pytest

from kbench.analysis import intra
from kbench.errors import KbenchError
from tests.conftest import DATA

TEXT = lzma.decompress((DATA / "proton_h100" / "mm_instr.chrome_trace.xz").read_bytes()).decode()
EVENTS = json.loads(TEXT)["traceEvents"]


def test_records_carry_cta_sm_warp_and_task() -> None:
    records = intra.from_proton_trace(TEXT)
    assert len(records) == len(EVENTS) == 2176  # 16 CTAs x 8 warps x (8 loads + 8 mmas + 1 store)
    first = EVENTS[0]  # 'tiled_mm Core0 CTA11', 'warp 0 (line 0)'
    assert (records[0].cta, records[0].sm, records[0].warp, records[0].task) == (11, 0, 0, first["name"])
    assert records[0].us == pytest.approx(first["dur"])


def test_the_figures_agree_with_the_raw_events() -> None:
    a = intra.analyse(intra.from_proton_trace(TEXT))
    assert (a.ctas, a.sms) == (16, 16)
    assert a.task_events == {"load": 1024, "mma": 1024, "store": 128}
    # one CTA's span, straight from the trace
    mine = [e for e in EVENTS if e["pid"].endswith(" CTA11")]
    span = max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)
    spans = []
    for cta in {e["pid"] for e in EVENTS}:
        evs = [e for e in EVENTS if e["pid"] == cta]
        spans.append(max(e["ts"] + e["dur"] for e in evs) - min(e["ts"] for e in evs))
    assert a.cta_time.min_us <= span <= a.cta_time.max_us
    assert a.imbalance == pytest.approx(max(spans) / (sum(spans) / len(spans)))
    # one CTA per SM here: each SM is busy exactly its CTA's span over the kernel's
    assert a.sm_busy_pct.max_us == pytest.approx(100.0 * max(spans) / a.span_us)
    assert 0.0 < a.gap_share_pct < 100.0 and a.gap_us is not None
    # one CTA per SM, each SM idle after it until the slowest ends
    assert a.ctas_per_sm.max_us == 1.0 and a.unused_sms is None
    ends = {e["pid"]: max(x["ts"] + x["dur"] for x in EVENTS if x["pid"] == e["pid"]) for e in EVENTS}
    last = max(ends.values())
    assert a.tail_idle_pct == pytest.approx(100 * sum(last - t for t in ends.values()) / (len(ends) * a.span_us))
    assert intra.analyse(intra.from_proton_trace(TEXT), device_sms=132).unused_sms == 116


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not a readable Chrome trace"),
        ('{"x": 1}', "not a Chrome trace"),
        ('{"traceEvents": [{"ph": "X", "pid": "kernel", "tid": "warp 0", "ts": 0, "dur": 1}]}', "no task events"),
    ],
)
def test_a_trace_without_task_events_is_one_line(text: str, message: str) -> None:
    with pytest.raises(KbenchError, match=message):
        intra.from_proton_trace(text, "t.json")


H100 = DATA / "intra_h100"


def _trace(name: str) -> str:
    return lzma.decompress((H100 / name).read_bytes()).decode()


def test_kbench_s_h100_trace_of_the_shipped_matmul() -> None:
    text = _trace("v2_intra-mm.json.xz")
    meta = json.loads(text)["otherData"]
    assert (meta["ctas"], meta["dropped_records"], meta["unpaired_records"], meta["timer_step_ns"]) == (512, 0, 0, 32)
    a = intra.analyse(intra.from_proton_trace(text), device_sms=132)
    assert (a.ctas, a.sms, a.unused_sms) == (512, 132, 0)
    assert a.task_events == {"mainloop": 512, "store": 512}
    # 512 CTAs, one at a time per SM (147 KB of shared memory each): 116 SMs ran 4, 16 ran 3
    per_sm: dict[str, set[str]] = {}
    for e in json.loads(text)["traceEvents"]:
        per_sm.setdefault(e["pid"].split()[1], set()).add(e["pid"])
    counts = sorted(len(v) for v in per_sm.values())
    assert (counts.count(3), counts.count(4)) == (16, 116)
    assert (a.ctas_per_sm.min_us, a.ctas_per_sm.max_us) == (3.0, 4.0)
    # an SM with one CTA fewer is busy about 3/4 of the span: the minimum SM busy, and the idle tail
    assert 70.0 < a.sm_busy_pct.min_us < 80.0 < a.sm_busy_pct.median_us
    assert 0.0 < a.tail_idle_pct < 10.0
    assert a.tasks["store"].median_us < 0.05 * a.tasks["mainloop"].median_us  # the epilogue is a sliver


def test_kbench_and_proton_record_the_same_kernel_as_compare_json_says() -> None:
    found = json.loads((H100 / "compare.json").read_text())
    ours = intra.analyse(intra.from_proton_trace(_trace("cmp_kbench_trace.json.xz")), 132)
    proton = intra.analyse(intra.from_proton_trace(_trace("proton_trace.chrome_trace.xz")), 132)
    for mine, theirs in ((ours, found["kbench"]), (proton, found["proton"])):
        assert mine.tasks["mainloop"].median_us == pytest.approx(theirs["mainloop_median_us"])
        assert mine.span_us == pytest.approx(theirs["span_us"])
        assert mine.tail_idle_pct == pytest.approx(theirs["tail_idle_pct"])
    assert ours.ctas == proton.ctas == found["grid"] == 512
    assert sum(proton.task_events.values()) == found["proton"]["events"] == 8 * 2 * 512  # every warp records
    # Proton's per-warp records stretch the kernel: its main loop takes half again as long per CTA
    assert proton.tasks["mainloop"].median_us > 1.4 * ours.tasks["mainloop"].median_us
    assert found["kbench"]["recording_us"] < 1.02 * found["kbench"]["plain_us"]
    assert found["proton"]["instrumented_us"] > 50 * found["kbench"]["plain_us"]


def test_two_ctas_share_each_sm_and_a_cta_alone_is_faster() -> None:
    """matmul base on the H100: 96 KB of shared memory a CTA, so an SM holds two; the few CTAs that found their SM
    to themselves at the end ran faster than those sharing it."""
    text = _trace("base_intra-mm.json.xz")
    a = intra.analyse(intra.from_proton_trace(text), device_sms=132)
    assert a.ctas == 1024 and a.at_once is not None and a.at_once.min_us == a.at_once.max_us == 2.0
    assert a.cta_alone is not None and a.cta_shared is not None
    assert a.cta_alone.n + a.cta_shared.n == 1024 and a.cta_alone.n < 132
    assert a.cta_alone.median_us < 0.8 * a.cta_shared.median_us
    v2 = intra.analyse(intra.from_proton_trace(_trace("v2_intra-mm.json.xz")), device_sms=132)
    assert v2.at_once is not None and v2.at_once.max_us == 1.0 and v2.cta_shared is None  # 147 KB: one at a time
