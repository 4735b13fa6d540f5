"""The on-disk autotune cache: reuse, corrupt and stale entries, atomic writes."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kbench.plan import autotune

SPACE = [{"BLOCK": 64}, {"BLOCK": 128}, {"BLOCK": 256}]
TIMES = {64: 30.0, 128: 10.0, 256: 20.0}


def _timer(calls: list[int]):
    def time_us(cfg):
        calls.append(cfg["BLOCK"])
        return TIMES[cfg["BLOCK"]]

    return time_us


def test_tunes_then_reads_the_cache(tmp_path: Path) -> None:
    path = autotune.entry_path(tmp_path, "H100 SXM", "pkg", "v2", "stage", "n1_float32")
    assert path.relative_to(tmp_path).parts == ("H100_SXM", "pkg", "v2", "stage", "n1_float32.json")
    calls: list[int] = []
    first = autotune.tune(SPACE, _timer(calls), path, "triton 3.6")
    assert first.source == "tuned" and first.best == {"BLOCK": 128} and calls == [64, 128, 256]
    assert [h["us"] for h in first.history] == [30.0, 10.0, 20.0]
    second = autotune.tune(SPACE, _timer(calls), path, "triton 3.6")
    assert second.source == "cache" and second.best == {"BLOCK": 128} and calls == [64, 128, 256]
    assert not list(path.parent.glob("*.tmp"))


def test_single_config_is_not_tuned(tmp_path: Path) -> None:
    r = autotune.tune([{"BLOCK": 64}], _timer([]), tmp_path / "x.json", "t")
    assert r.source == "fixed" and not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"schema": 1}',
        '{"schema": 1, "best": [], "history": []}',
        '{"schema": 1, "best": {"BLOCK": 128}, "history": [{"config": {"BLOCK": 128}}]}',
        '{"schema": 1, "best": {"BLOCK": 128}, "history": [{"config": 3, "us": 1.0}]}',
        '{"schema": 1, "best": {"BLOCK": 128}, "history": [{"config": {"BLOCK": 128}, "us": "fast"}]}',
    ],
)
def test_corrupt_entry_is_reported_in_one_line_and_retuned(tmp_path: Path, caplog, content: str) -> None:
    path = tmp_path / "e.json"
    path.write_text(content)
    with caplog.at_level(logging.WARNING):
        r = autotune.tune(SPACE, _timer([]), path, "t")
    assert r.source == "tuned" and r.best == {"BLOCK": 128}
    (msg,) = caplog.messages
    assert "is corrupt" in msg and "re-tuning" in msg and "\n" not in msg
    assert json.loads(path.read_text())["best"] == {"BLOCK": 128}


@pytest.mark.parametrize(("change", "reason"), [("space", "stale"), ("toolchain", "stale"), ("best", "outside")])
def test_stale_entry_is_retuned_and_rewritten(tmp_path: Path, caplog, change: str, reason: str) -> None:
    path = tmp_path / "e.json"
    autotune.tune(SPACE, _timer([]), path, "triton 3.6")
    space, toolchain = list(SPACE), "triton 3.6"
    if change == "space":
        space = SPACE[:2]
    elif change == "toolchain":
        toolchain = "triton 3.7"
    else:
        data = json.loads(path.read_text())
        data["best"] = {"BLOCK": 1024}
        path.write_text(json.dumps(data))
    calls: list[int] = []
    with caplog.at_level(logging.WARNING):
        r = autotune.tune(space, _timer(calls), path, toolchain)
    assert r.source == "tuned" and calls == [c["BLOCK"] for c in space]
    (msg,) = caplog.messages
    assert reason in msg and "re-tuning" in msg
    rewritten = json.loads(path.read_text())
    assert rewritten["space"] == space and rewritten["toolchain"] == toolchain and rewritten["best"] == {"BLOCK": 128}


def test_failed_configs_are_recorded_as_null_and_a_total_failure_raises(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    r = autotune.tune(SPACE, lambda cfg: None if cfg["BLOCK"] == 128 else float(cfg["BLOCK"]), path, "t")
    assert r.best == {"BLOCK": 64} and [h["us"] for h in r.history] == [64.0, None, 256.0]
    text = path.read_text()
    assert "Infinity" not in text and json.loads(text)["history"][1]["us"] is None
    again = autotune.tune(SPACE, _timer([]), path, "t")
    assert again.source == "cache"
    with pytest.raises(autotune.TuningFailed, match="none of the 3 tuning configurations ran"):
        autotune.tune(SPACE, lambda cfg: None, tmp_path / "f.json", "t")
    assert not (tmp_path / "f.json").exists()


def test_forget_deletes_an_entry(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    autotune.tune(SPACE, _timer([]), path, "t")
    assert autotune.forget(path) and not path.exists() and not autotune.forget(path) and not autotune.forget(None)


def test_an_unwritable_cache_is_reported_not_fatal(tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "ro"
    blocker.write_text("a file where the cache folder should be")
    with caplog.at_level(logging.WARNING):
        r = autotune.tune(SPACE, _timer([]), blocker / "sub" / "e.json", "t")
    assert r.best == {"BLOCK": 128} and "cannot write autotune cache" in caplog.messages[0]
