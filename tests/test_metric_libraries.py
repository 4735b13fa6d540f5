"""Which copy of NVIDIA's metric library a process's CUPTI gets (kbench.metric_libraries): CUPTI's own copies are
loaded by path before ncu_report's, and PM sampling refuses to run where another copy came first (the resident that
crashed after an annotation command had loaded Nsight Compute's copy into it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbench import metric_libraries, ncu_preload
from kbench.capture import sampling

CUPTI = Path("/site/nvidia/cu13/lib")
NCU = Path("/site/ncu_report")
TOOLKIT = Path("/usr/local/cuda-13.0/targets/x86_64-linux/lib")


def maps_line(path: Path | None, inode: int = 4242) -> str:
    """A /proc/<pid>/maps line as Linux writes it (an anonymous mapping has no path)."""
    where = f"                   {path}" if path else ""
    return f"7f3c1a000000-7f3c1a200000 r-xp 00000000 fd:01 {inode if path else 0}{where}"


def test_mapped_reads_the_metric_libraries_of_a_maps_text_once_each() -> None:
    text = "\n".join(
        [
            maps_line(NCU / "libnvperf_host.so"),
            maps_line(NCU / "libnvperf_host.so"),  # one library maps several segments
            maps_line(None),
            maps_line(CUPTI / "libcupti.so.13"),
            maps_line(Path("/opt/dir with space/libnvperf_target.so")),
        ]
    )
    assert metric_libraries.mapped(text) == [NCU / "libnvperf_host.so", Path("/opt/dir with space/libnvperf_target.so")]


def test_nothing_loaded_yet_loads_cuptis_own_copies() -> None:
    todo, why = metric_libraries.plan([], CUPTI, list(metric_libraries.NAMES))
    assert why is None
    assert todo == [CUPTI / "libnvperf_host.so", CUPTI / "libnvperf_target.so"]


def test_cuptis_copies_first_then_ncu_reports_is_the_order_that_holds() -> None:
    loaded = [CUPTI / "libnvperf_host.so", CUPTI / "libnvperf_target.so", NCU / "libnvperf_host.so"]
    assert metric_libraries.plan(loaded, CUPTI, list(metric_libraries.NAMES)) == ([], None)


@pytest.mark.parametrize("first", [NCU, TOOLKIT])
def test_another_copy_loaded_first_refuses_sampling(first: Path) -> None:
    todo, why = metric_libraries.plan([first / "libnvperf_host.so"], CUPTI, list(metric_libraries.NAMES))
    assert todo == []
    assert why is not None and str(first / "libnvperf_host.so") in why and "fresh process" in why


def test_a_library_cupti_does_not_ship_beside_it_is_left_alone() -> None:
    todo, why = metric_libraries.plan([NCU / "libnvperf_host.so"], CUPTI, ["libnvperf_target.so"])
    assert (todo, why) == ([CUPTI / "libnvperf_target.so"], None)


@pytest.fixture
def fake_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """A process with CUPTI's libraries in tmp_path/cupti and no metric library loaded: dlopen records what it loads
    (and the maps file grows as a real one would)."""
    cupti = tmp_path / "cupti"
    cupti.mkdir()
    for name in metric_libraries.NAMES:
        (cupti / name).write_bytes(b"")
    maps = tmp_path / "maps"
    maps.write_text(maps_line(cupti / "libcupti.so.13") + "\n")
    loaded: list[Path] = []

    def dlopen(path: Path, flags: int) -> None:
        loaded.append(path)
        with maps.open("a") as f:
            f.write(maps_line(path) + "\n")

    monkeypatch.setattr(metric_libraries, "cupti_dir", lambda: cupti)
    monkeypatch.setattr(metric_libraries, "MAPS", maps)
    monkeypatch.setattr(metric_libraries, "dlopen", dlopen)
    monkeypatch.setattr(metric_libraries, "_claimed", [])
    return loaded


def test_ncu_preload_loads_cuptis_copies_before_ncu_reports(
    fake_process: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "torch", object())  # a process that profiles (the resident)
    ncu = tmp_path / "ncu_report" / "libnvperf_host.so"
    ncu_preload._dlopen(ncu)
    assert fake_process == [tmp_path / "cupti" / n for n in metric_libraries.NAMES] + [ncu]
    assert metric_libraries.claim() is None  # and a later sampler finds the order right


def test_a_sampler_is_refused_where_ncu_reports_copy_came_first(
    fake_process: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with metric_libraries.MAPS.open("a") as f:  # a notebook that read a capture before kbench sampled
        f.write(maps_line(tmp_path / "ncu_report" / "libnvperf_host.so") + "\n")

    class Binding:
        class Collector:
            def __init__(self, index: int) -> None:
                raise AssertionError("CUPTI must not be touched")

    monkeypatch.setattr(sampling, "_cupti", lambda: (None, Binding, None))
    why = sampling.Sampler.open(0)
    assert isinstance(why, str) and "ncu_report" in why and "PM sampling is skipped" in why
    assert fake_process == []  # nothing loaded on top of the foreign copy


def test_claim_is_nothing_without_a_driver_or_binding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(metric_libraries, "DRIVER", tmp_path / "no-driver")
    monkeypatch.setattr(metric_libraries, "_claimed", [])
    assert metric_libraries.cupti_dir() is None
    assert metric_libraries.claim() is None


def test_the_binding_s_libcupti_is_the_one_its_functions_lie_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two libcupti copies in one process (the binding's and a CUDA torch's): the one holding the binding's function
    pointers is the binding's, whatever a search by name would answer."""
    torchs, bindings = Path("/opt/torch/nvidia/cu13/lib"), Path("/tmp/site/nvidia/cu13/lib")
    maps = tmp_path / "maps"
    maps.write_text(
        "7f0000000000-7f0000100000 r-xp 00000000 fd:01 11  " + str(torchs / "libcupti.so.13") + "\n"
        "7f0000200000-7f0000300000 r-xp 00000000 fd:01 12  " + str(bindings / "libcupti.so.13") + "\n"
        "7f0000400000-7f0000500000 r-xp 00000000 fd:01 13  /usr/lib/libc.so.6\n"
    )
    assert metric_libraries.holder(maps.read_text(), 0x7F0000250000) == bindings / "libcupti.so.13"
    assert metric_libraries.holder(maps.read_text(), 0x7F0000150000) is None

    driver = tmp_path / "version"
    driver.write_text("NVRM version: fake\n")
    monkeypatch.setattr(metric_libraries, "DRIVER", driver)
    monkeypatch.setattr(metric_libraries, "MAPS", maps)
    pointers = {"__cuptiGetVersion": 0, "__cuptiGetTimestamp": 0x7F0000250000}
    monkeypatch.setattr(metric_libraries, "_binding_pointers", lambda: pointers)
    assert metric_libraries.cupti_dir() == Path(os.path.realpath(bindings))


def test_a_one_shot_analysis_never_loads_cupti(fake_process: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`kbench analyze` never samples: it does not pay for CUPTI (the binding, the driver, the metric library); a
    process that has loaded torch (the resident, a notebook) claims before ncu_report's copy loads."""
    import sys

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    metric_libraries.claim_if_sampling_may_follow()
    assert fake_process == [] and metric_libraries._claimed == []
    monkeypatch.setitem(sys.modules, "torch", object())
    metric_libraries.claim_if_sampling_may_follow()
    assert [p.name for p in fake_process] == list(metric_libraries.NAMES)
