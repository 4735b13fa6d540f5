"""`kbench analyze` of a capture without a plan: the device the report names gives its peaks from conf/devices.json,
and ncu's counts of FLOPs and DRAM bytes place each stage on that roofline (it said "Ceilings: n/a (no FLOP/byte
model or device peaks)" although the capture names an H100); the analytic columns stay n/a and no chart is drawn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench.cli.app import app
from tests.conftest import DATA


def analyzed(capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(app, ["analyze", str(capture), "--out", "out"])
    assert done.exit_code == 0, done.output
    (run,) = [p.parent for p in (tmp_path / "out").rglob("report.md")]
    return run


def test_a_bare_h100_capture_is_placed_against_the_h100_peaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = analyzed(DATA / "ncu_h100" / "full_mm.ncu-rep", tmp_path, monkeypatch)
    text = (run / "report.md").read_text()
    assert "Ceilings: datasheet peaks of H100_SXM from conf/devices.json, against ncu's counts" in text
    peaks = json.loads((Path(__file__).parents[1] / "conf" / "devices.json").read_text())
    h100 = peaks["devices"]["H100_SXM"]
    row = next(line for line in text.splitlines() if line.startswith("| mm_kernel | bf16 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    flops, nbytes, ridge, bound_us, eff, roof = (
        float(cells[2]),
        float(cells[3]),
        cells[5],
        cells[8],
        cells[9],
        cells[10],
    )
    assert float(ridge) == pytest.approx(h100["peak_tflops"]["bf16"] * 1e12 / (h100["dram_gbps"] * 1e9), abs=0.1)
    assert float(bound_us) == pytest.approx(flops / (h100["peak_tflops"]["bf16"] * 1e6), rel=1e-3)
    assert roof == "compute"
    assert float(eff) == pytest.approx(100 * float(bound_us) / 228.90, abs=0.1)
    assert nbytes > 0
    counters = next(line for line in text.splitlines() if line.startswith("| mm_kernel | mm_kernel | ("))
    assert counters.rstrip(" |").split("|")[-4:-2] == [" n/a ", " n/a "]  # Analytic FLOPs and bytes: no plan
    assert not (run / "roofline.png").exists()
