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
