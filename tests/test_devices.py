"""conf/devices.json: the one table of device peaks, validated at load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kbench
from kbench.analysis.devices import devices_path, load_devices, named_device, resolve
from kbench.errors import ConfigError, UsageError

REPO_CONF = Path(__file__).parents[1] / "conf" / "devices.json"


def test_table_has_the_required_parts_with_sources() -> None:
    table = load_devices()
    assert {"H100_SXM", "H100_PCIe", "H200_SXM", "A100_SXM4_40GB", "A100_SXM4_80GB", "L40S"} <= set(table.devices)
    for key, spec in table.devices.items():
        assert spec.sources["dram_gbps"] and spec.sources["peak_tflops"], key
        assert {"fp32", "bf16", "fp16"} <= set(spec.peak_tflops), key
    assert "fp8" not in table.devices["A100_SXM4_80GB"].peak_tflops  # Ampere has none: never borrowed


def test_packaged_copy_is_the_repository_copy() -> None:
    path = devices_path()
    assert path.is_file()
    assert json.loads(path.read_text()) == json.loads(REPO_CONF.read_text())
    if "site-packages" in kbench.__file__:  # a non-editable install must carry the file as package data
        assert "site-packages" in str(path)


def test_h100_ridge_point_follows_the_contract() -> None:
    c = load_devices().devices["H100_SXM"].ceilings("H100_SXM")["bf16"]
    assert c.ridge == pytest.approx(989.4e12 / 3.35e12, rel=1e-6)
    assert 290 < c.ridge < 300


def test_nvml_names_resolve_and_unknown_stays_unknown() -> None:
    table = load_devices()
    h100 = resolve(table, "NVIDIA H100 80GB HBM3")  # the name NVML reports on the fixture machine
    assert h100.key == "H100_SXM" and h100.known
    other = resolve(table, "NVIDIA GeForce RTX 4090")
    assert other.key is None and other.spec is None and not other.known
    assert named_device(table, "H200_SXM").spec is table.devices["H200_SXM"]
    with pytest.raises(UsageError, match="unknown device 'B300'"):
        named_device(table, "B300")


def _write(tmp_path: Path, mutate) -> Path:
    data = json.loads(REPO_CONF.read_text())
    mutate(data)
    path = tmp_path / "devices.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["devices"]["H100_SXM"].update(dram_gbps=-1),
            "field devices.H100_SXM.dram_gbps: Input should be greater than 0",
        ),
        (lambda d: d["devices"]["L40S"]["peak_tflops"].update(fp4=1.0), "field devices.L40S.peak_tflops.fp4"),
        (lambda d: d["devices"]["H200_SXM"].pop("sm_count"), "field devices.H200_SXM.sm_count: Field required"),
        (lambda d: d["devices"]["H200_SXM"]["sources"].pop("dram_gbps"), "sources must name where dram_gbps come from"),
        (
            lambda d: d["devices"]["H100_SXM"].update(speed=1),
            "field devices.H100_SXM.speed: Extra inputs are not permitted",
        ),
    ],
)
def test_malformed_table_names_the_field(tmp_path: Path, monkeypatch, mutate, message: str) -> None:
    monkeypatch.setenv("KBENCH_DEVICES", str(_write(tmp_path, mutate)))
    with pytest.raises(ConfigError) as e:
        load_devices()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_unreadable_tables(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KBENCH_DEVICES", str(tmp_path / "none.json"))
    with pytest.raises(ConfigError, match="cannot read device table"):
        load_devices()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    monkeypatch.setenv("KBENCH_DEVICES", str(bad))
    with pytest.raises(ConfigError, match="not valid JSON at line 1"):
        load_devices()


def test_the_practical_memory_roof_is_the_highest_stream_measured() -> None:
    spec = load_devices().devices["H100_SXM"]
    streams = [spec.measured[k].value for k in ("dram_gbps", "stream_read_gbps", "stream_write_gbps")]
    roofs = spec.practical()
    assert {c.gbps for c in roofs.values()} == {max(streams)}
    assert "measured write-only streaming" in roofs["bf16"].source
    assert spec.limits is not None and spec.limits.shared_bytes_per_clock == 128
    assert spec.limits.tensor_flops_per_clock["bf16"] == 4096 and spec.limits.feed_source


def test_tensor_feed_numbers_need_a_source(tmp_path: Path, monkeypatch) -> None:
    table = json.loads(REPO_CONF.read_text())
    del table["devices"]["H100_SXM"]["limits"]["feed_source"]
    path = tmp_path / "devices.json"
    path.write_text(json.dumps(table))
    with pytest.raises(ConfigError, match="feed_source"):
        load_devices(path)


@pytest.mark.slow
def test_a_gpu_report_names_its_device_one_way(tmp_path: Path) -> None:
    """The Environment line names the GPU as NVML did and its conf/devices.json key; the Ceilings line names the peaks
    it used by that same key, never by another name of the part (the table's display name: two names, one GPU)."""
    from kbench import pipeline
    from kbench.plan.discovery import load_version

    capture = Path(__file__).parent / "data" / "kbench_h100" / "nsys_fork_join.sqlite"
    plan = load_version("fork_join", "base").from_values({"m": "4096", "n": "4096", "k": "4096", "w": "65536"})
    text = pipeline.analyze(capture, None, tmp_path, plan).report_md
    spec = load_devices().devices["H100_SXM"]
    (device,) = [line for line in text.splitlines() if line.startswith("- Device: ")]
    (ceilings,) = [line for line in text.splitlines() if line.startswith("Ceilings: ")]
    assert device == f"- Device: {spec.nvml_names[0]} (conf/devices.json: H100_SXM)"
    assert "H100_SXM" in ceilings and spec.display_name not in text


def test_every_name_of_a_chip_is_listed_as_its_entrys_display_name() -> None:
    # one chip, one name in `kbench runs` (issue 50): NVML's names, the display name, or the key alone
    table = load_devices()
    for key, spec in table.devices.items():
        for name in (spec.display_name, *spec.nvml_names):
            assert table.chip_name(name, None) == table.chip_name(name, key) == spec.display_name
        assert table.chip_name(None, key) == spec.display_name
    assert table.chip_name("NVIDIA H200", "H100_SXM") == "NVIDIA H200 SXM 141GB"  # the name recorded decides
    for unknown in ("NVIDIA B300", "NVIDIA H100 80GB HBM3 (114 SMs, not 132)"):  # another part, a cut-down one
        assert table.chip_name(unknown, None) == unknown
    assert table.chip_name(None, None) is None and table.chip_name(None, "B300") is None
