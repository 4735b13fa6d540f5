"""Routes past the compiler's choices (issue 51, item 3): ptxas's serialized wgmmas read from its messages and the
SASS, a loop Triton left unpipelined although num_stages > 1, and the routes past work repeated by warpgroups, each
route with the effect measured in this repository."""

from __future__ import annotations

import json
import lzma
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from kbench.analysis import ptxas
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.opportunities import Opportunity
from kbench.analysis.ttgir import compiled_facts
from kbench.capture import ptxas as capture_ptxas
from kbench.modes.base import Context
from kbench.modes.event import EVENT
from kbench.report import folder as run_folder
from tests.conftest import DATA
from tests.test_diagnosis import every_item, plan_of

PTXAS = DATA / "ptxas_sm90"
V2 = DATA / "validation_h100_1125" / "mla_decode-v2-s16" / "event"
V4 = DATA / "validation_h100_1125" / "mla_decode-v4-s16" / "event"


def sass(name: str) -> str:
    return lzma.decompress((PTXAS / f"{name}.sass.xz").read_bytes()).decode()


def test_the_serialization_advisory_is_read_as_ptxas_wrote_it() -> None:
    # the words docs/kernels/mla_decode.md quotes from the H100's ptxas on v8's first cut (C7512)
    quoted = ptxas.serialized((PTXAS / "c7512_quoted.txt").read_text())
    assert quoted is not None and quoted.code == "C7512" and quoted.registers
    assert quoted.reason == "insufficient register resources"
    # CUDA 13.0's ptxas on mla_decode v2 at d=512 on 4 warps: the same advisory numbered C7511, naming the function
    real = (PTXAS / "mla_v2_w4.ptxas.txt").read_text()
    found = ptxas.serialized(real, "mla_v2_fused_kernel")
    assert found is not None and found.code == "C7511" and found.registers
    assert found.message.startswith("(C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized")
    assert ptxas.serialized(real, "another_kernel") is None
    assert ptxas.compiled_functions(real) == ["mla_v2_fused_kernel"]
    # v2 as compiled on the H100 (8 warps): spills reported, no advisory
    assert ptxas.serialized((PTXAS / "mla_v2_h100.ptxas.txt").read_text()) is None


def test_the_sass_shows_every_hgmma_drained_before_the_next() -> None:
    assert ptxas.drained_hgmmas(sass("mla_v2_w4")) == (44, 44)  # serialized: a wait after each
    assert ptxas.drained_hgmmas(sass("mla_v2_h100")) == (3, 76)  # pipelined: a wait after a group
    assert ptxas.drained_hgmmas("no tensor instructions") is None


def _fake_ptxas(tmp_path: Path, body: str) -> Path:
    tool = tmp_path / "bin" / "ptxas"
    tool.parent.mkdir()
    tool.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "argv"}\n{body}\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def test_capture_keeps_ptxas_messages_beside_the_ptx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a fake ptxas on PATH printing the real advisory: run on the saved PTX for its own target (sm_90 -> sm_90a),
    # its messages kept in compiled/<stage>/ptxas.txt, read back into the launch record of a run made before
    advisory = (PTXAS / "mla_v2_w4.ptxas.txt").read_text().splitlines()[0]
    tool = _fake_ptxas(tmp_path, f'echo "{advisory}"')
    monkeypatch.delenv("KBENCH_PTXAS", raising=False)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    stage = tmp_path / "run" / "compiled" / "attention"
    stage.mkdir(parents=True)
    (stage / "mla_v2_fused_kernel.ptx").write_text("//\n.version 8.7\n.target sm_90\n.address_size 64\n")
    assert capture_ptxas.find() == tool
    said = capture_ptxas.keep(stage, ["mla_v2_fused_kernel"], capture_ptxas.find())
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:3] == ["-arch=sm_90a", "-v", "-warn-spills"] and argv[-1].endswith("mla_v2_fused_kernel.ptx")
    assert "(C7511)" in said["mla_v2_fused_kernel"] and "(C7511)" in (stage / "ptxas.txt").read_text()
    tiling = tmp_path / "run" / "tiling"
    tiling.mkdir()
    (tiling / "attention.json").write_text(json.dumps({"kernel": "mla_v2_fused_kernel", "atomics": []}))
    record = run_folder.tiling_beside(tmp_path / "run" / "timings.json")["attention"]
    assert record["wgmma_serialized"]["code"] == "C7511" and record["hgmma_drained"] is None


def test_capture_goes_without_a_failing_or_missing_ptxas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(".target sm_90a\n")
    failing = _fake_ptxas(tmp_path, "exit 3")
    monkeypatch.setattr(capture_ptxas, "_bundled", list)  # no Triton copy to fall back on
    assert capture_ptxas.messages(ptx, failing) is None
    # a toolkit's ptxas that refuses the PTX: Triton's own copy is tried next
    bundled = tmp_path / "triton" / "ptxas"
    bundled.parent.mkdir()
    bundled.write_text("#!/bin/sh\necho 'ptxas info    : Used 168 registers'\n")
    bundled.chmod(0o755)
    monkeypatch.setattr(capture_ptxas, "_bundled", lambda: [bundled])
    assert capture_ptxas.messages(ptx, failing) == "ptxas info    : Used 168 registers\n"
    assert capture_ptxas.messages(ptx, None) is None
    (tmp_path / "n.ptx").write_text("no target line\n")
    assert capture_ptxas.messages(tmp_path / "n.ptx", tmp_path / "bin" / "ptxas") is None
    assert capture_ptxas.keep(tmp_path, ["k"], None) == {} and not (tmp_path / capture_ptxas.FILE).exists()


def _event_items(run: Path, tiling: dict[str, dict[str, Any]]) -> list[Opportunity]:
    """Every item the catalogue names for a committed event run, with ``tiling`` as its launch records."""
    from kbench.analysis import opportunities

    device = json.loads((run / "result.json").read_text())["device"]
    ctx = Context(plan_of(run), load_devices(), resolve(load_devices(), device))
    capture = EVENT.open(run / "timings.json")
    seen: list[Opportunity] = []
    ranked = opportunities.rank

    def spy(candidates: Any, **kw: Any) -> Any:
        seen.extend(c for c in candidates if c is not None)
        return ranked(candidates, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(opportunities, "rank", spy)
        EVENT.analyse(type(capture)(files=capture.files, live=False, tiling=tiling, predicted={}), ctx)
    return seen


def _records(run: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (run / "tiling").glob("*.json")}


def test_wgmma_serialized_for_lack_of_registers_names_its_routes() -> None:
    # mla_decode v2's H100 event capture (s=16) with the messages of ptxas and the SASS of its 4-warp compile set in
    # its launch record (the kernel whose wgmmas ptxas serialized): the item quotes ptxas and the SASS, its gain is
    # the distance to the roof and says so, its change names the routes with what each measured here
    tiling = _records(V2)
    facts = ptxas.facts((PTXAS / "mla_v2_w4.ptxas.txt").read_text(), sass("mla_v2_w4"), "mla_v2_fused_kernel")
    tiling["attention"].update(facts)
    (item,) = [o for o in _event_items(V2, tiling) if o.metric == "attention.wgmma_serialized"]
    assert item.name.startswith('wgmma serialized by ptxas for lack of registers in attention: ptxas: "(C7511)')
    assert "its SASS waits for each of its 44 HGMMAs (WARPGROUP.DEPBAR.LE gsb0, 0x0) before the next" in item.name
    assert "gain up to the distance to the roof" in item.name and item.value == "C7511"
    assert item.formula.startswith("100 * max(0, min(saved_us") and item.inputs["saved_us"] == item.inputs["gap_us"]
    assert item.change is not None
    for route in ("more warps on the same tile", "475.9 us, 258.8 on 8", "248.9 -> 167.6 us", "setmaxnreg"):
        assert route in item.change
    # the same capture as recorded (v2 on 8 warps, no advisory, its SASS not kept): no such item
    assert not any(o.metric == "attention.wgmma_serialized" for o in _event_items(V2, _records(V2)))


def test_sass_alone_names_serialized_wgmma_only_at_full_registers() -> None:
    from kbench.analysis.catalogue import routes
    from tests.test_catalogue import evidence

    drained = ptxas.drained_hgmmas(sass("mla_v2_w4"))
    e = evidence(1000.0, nbytes=1e6, bottleneck="Compute", hgmma_drained=drained, registers=255)
    found = routes.serialized_wgmma(e)
    assert found is not None and found.value == "SASS" and "ptxas:" not in found.name
    assert routes.serialized_wgmma(evidence(1000.0, hgmma_drained=drained, registers=128)) is None
    healthy = ptxas.drained_hgmmas(sass("mla_v2_h100"))
    assert routes.serialized_wgmma(evidence(1000.0, hgmma_drained=healthy, registers=255)) is None
    other = ptxas.Serialized(code="C7510", reason="the presence of Extern calls", message="(C7510) ...")
    assert routes.serialized_wgmma(evidence(1000.0, wgmma_serialized=other)) is None


def test_a_loop_left_unpipelined_at_two_stages_names_the_barrier_and_the_routes() -> None:
    # mla_decode v4 on the H100 (num_stages=2, no cp.async or TMA in its PTX) with the TTGIR of the same kernel: its
    # dots sit in the loop, and so does the tl.debug_barrier that kept Triton's pipeliner off it (v4.py:90)
    tiling = _records(V4)
    tiling["attention"].update(compiled_facts((DATA / "ttgir_triton39_sm90" / "mla_v4_d512.ttgir").read_text()))
    assert tiling["attention"]["loop_barriers"] == ["v4.py:90"]
    (item,) = [o for o in _event_items(V4, tiling) if o.metric == "attention.async_copies"]
    assert item.name.startswith("Operand loads not pipelined in attention although num_stages=2")
    assert "a CTA barrier in the loop at v4.py:90 (tl.debug_barrier) stops Triton's software pipeliner" in item.name
    assert item.change is not None and "remove the tl.debug_barrier at v4.py:90" in item.change
    for route in ("298.3 us", "323.7 and 301.5 us", "tl.make_tensor_descriptor", "156.60 us", "38.8-39.9%"):
        assert route in item.change
    # without the TTGIR (as recorded then) nothing says the dots are in a loop: no item, as before
    assert not any(o.metric == "attention.async_copies" for o in _event_items(V4, _records(V4)))
    # v2 at the same point copies its tiles with cp.async: pipelined, no item whatever its TTGIR
    tiling = _records(V2)
    tiling["attention"].update(compiled_facts((DATA / "ttgir_triton39_sm90" / "mla_v2_d512.ttgir").read_text()))
    assert not any(o.metric == "attention.async_copies" for o in _event_items(V2, tiling))


def test_repeated_work_names_each_route_with_its_measured_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    # mla_decode v2 at d=512: 256 accumulator registers one warpgroup would need, so no tile change: Gluon (v7), the
    # runtime branch (a user's 226 us, v6_branch here 442.60 us on Triton 3.6) and the exchange through memory (v4)
    (rep,) = [
        o for o in every_item("h100_1125/mla_decode-v2-s16", "event", monkeypatch)
        if o.metric == "attention.repeated_tensor_work"
    ]  # fmt: skip
    assert rep.change is not None and "Routes that reach it:" in rep.change
    for route in ("156.60 us against the fused Triton v6's 244.07", "160.29 against 250.28", "226.1 us",
                  "did not work on Triton 3.6", "442.60 us against v6's 244.07", "293.2 us", "475.9"):  # fmt: skip
        assert route in rep.change, route
    assert "num_warps=4, or 64 rows per warpgroup) needs 256" in rep.change
    # chain split at d=128: the accumulator fits one warpgroup: that first, with what it realized, then Gluon
    (rep,) = [
        o for o in every_item("h100_1125/chain-split", "event", monkeypatch)
        if o.metric == "attention.repeated_tensor_work"
    ]  # fmt: skip
    assert rep.change is not None and rep.change.index("num_warps=4") < rep.change.index("Gluon")
    assert "26.0-26.8% realized" in rep.change and "v6_branch" not in rep.change


def test_a_hostile_advisory_line_is_read_in_linear_time() -> None:
    # a ptxas.txt beside a capture is data: an advisory followed by a long run of blanks took quadratic time (40,000
    # blanks: 10 s; the 256 MB a run folder's file may hold: years)
    import time

    head = "(C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to x"
    began = time.perf_counter()
    found = ptxas.serialized(f"{head}{' ' * 200_000}y \n{head} z in the function 'k'   \n", "k")
    assert time.perf_counter() - began < 2.0
    assert found is not None and found.reason == f"x{' ' * 200_000}y"
    began = time.perf_counter()
    said = ptxas.serialized(f"{head} r in the function{' ' * 200_000}'k'", "other")  # names no function: any
    assert said is not None and said.reason.startswith("x r in the function")
    assert time.perf_counter() - began < 2.0
    assert capture_ptxas._TARGET.search("\n" * 200_000 + ".target sm_90\n") is not None


def test_a_ptxas_saying_bytes_that_are_no_text_is_read_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a ptxas (KBENCH_PTXAS, or one quoting a PTX path of odd bytes) printing what is not UTF-8: was exit 70
    # (UnicodeDecodeError), the capture lost; the messages are kept with the odd bytes replaced
    ptx = tmp_path / "k;$(x) .ptx"
    ptx.write_text(".target sm_90a\n")
    tool = _fake_ptxas(tmp_path, r"printf 'ptxas info    : \377\376 Used 8 registers\n'")
    monkeypatch.setattr(capture_ptxas, "_bundled", list)
    said = capture_ptxas.messages(ptx, tool)
    assert said is not None and "Used 8 registers" in said
    assert (tmp_path / "argv").read_text().split()[-2:] == [f"{tmp_path}/k;$(x)", ".ptx"]  # one argument, no shell
