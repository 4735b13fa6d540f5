"""Counting what executes: the atomic-contention entry (programs x atomics each program executes, at the addresses
they hit) and the repeat by warpgroups read from the compiled kernel's layouts, on the H100 runs of the atomics and
chain pairs (tests/data/validation_h100_1125) with the TTGIR facts of the same kernels (Triton 3.9 for sm_90 on a
CPU, tests/data/ttgir_triton39_sm90: those runs predate the TTGIR's record), and on the issue's two atomics cases."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kbench.analysis import opportunities
from kbench.analysis.catalogue.atomics import contention
from kbench.analysis.devices import load_devices, resolve
from kbench.analysis.opportunities import Opportunity
from kbench.analysis.ptx import instruction_mix
from kbench.analysis.ttgir import AtomicOp, atomics, compiled_facts
from kbench.modes.base import Context
from kbench.modes.event import EVENT
from kbench.plan.discovery import load_version
from tests.conftest import DATA, HAS_CUDA
from tests.test_catalogue import evidence
from tests.test_diagnosis import NEW, folder_of, plan_of

TTGIR = DATA / "ttgir_triton39_sm90"


def calls(name: str) -> list[AtomicOp]:
    return atomics((TTGIR / name).read_text())


def items(run: str, ttgir: str | None, monkeypatch: pytest.MonkeyPatch) -> list[Opportunity]:
    """Every item event mode names for a committed H100 run whose tiling record carries ``ttgir``'s facts."""
    folder = folder_of(f"{NEW}/{run}", "event")
    device = json.loads((folder / "result.json").read_text())["device"]
    ctx = Context(plan_of(folder), load_devices(), resolve(load_devices(), device))
    tiling = {p.stem: json.loads(p.read_text()) for p in (folder / "tiling").glob("*.json")}
    if ttgir is not None:
        for record in tiling.values():
            record.update(compiled_facts((TTGIR / ttgir).read_text()))
    seen: list[Opportunity] = []
    ranked = opportunities.rank

    def spy(candidates: Any, **kw: Any) -> Any:
        seen.extend(c for c in candidates if c is not None)
        return ranked(candidates, **kw)

    monkeypatch.setattr(opportunities, "rank", spy)
    capture = EVENT.open(folder / "timings.json")
    EVENT.analyse(type(capture)(files=capture.files, live=False, tiling=tiling), ctx)
    return sorted(seen, key=lambda o: -o.gain_pct)


def test_per_element_atomics_are_counted_per_element_of_every_program(monkeypatch: pytest.MonkeyPatch) -> None:
    # 16384 programs x 1024 atomics each (a block of 1024 on one address): 1.68e7, 30199 us serialized at 1.8 ns
    found = items("atomics-per_element", "per_element.ttgir", monkeypatch)
    top = found[0]
    assert top.name.startswith("Atomic contention in sum at _common.py:23: 1.68e+07 atomics executed at 1 address")
    assert "16384 programs x 1024 per program, one per element of a block (masked: at most)" in top.name
    assert top.value == "1.68e+07" and 99.0 < top.gain_pct < 100.0
    assert top.change is not None and "tl.sum over the block" in top.change


def test_the_scalar_contention_case_is_named_with_programs_x_1() -> None:
    # the issue's case: 524,288 programs each adding one scalar into one address; at 1.8 ns that is 943 us of the
    # 1,035-us stage, which the per-thread PTX count (1 < 2) did not name
    (one,) = calls("scalar_atomic_per_program.ttgir")
    e = evidence(1035.0, nbytes=524288 * 128.0, ctas=524288, warps=1, atomics=[one], atomic_serial_ns=1.8)
    found = contention(e)
    assert found is not None and found.value == "5.24e+05"
    assert "5.24e+05 atomics executed at 1 address take 944 us serialized (1.8 ns each) of the kernel's 1035 us" in (
        found.name
    )
    assert "524288 programs x one scalar atomic per program" in found.name
    assert found.change is not None and "second small kernel" in found.change
    # the fixed kernel needs its other work (1035 - 944 us) or its roof time (17 us): 944 of 1035 us
    assert abs(found.gain_pct - 100.0 * (1035.0 - (1035.0 - 524288 * 1.8e-3)) / 1035.0) < 1e-6


def test_a_predicated_scalar_atomic_max_whose_serialized_time_is_small_gets_no_item() -> None:
    # absmax (tests/data/validation/absmax) at 2^26: one tl.atomic_max per program (two exclusive ops, each predicated
    # to thread 0): 4096 programs x 1 = 7.4 us serialized in a kernel that reads 268 MB (87 us at the roof); the PTX
    # alone read it as 2 per thread x 256 threads, 2.1e6 in all
    facts = calls("absmax_fused.ttgir")
    mix = instruction_mix((TTGIR / "absmax_fused.ptx").read_text())
    kw: dict[str, Any] = {"ctas": 4096, "warps": 8, "atomic_serial_ns": 1.8, "instructions": mix}
    assert contention(evidence(100.0, nbytes=2.68e8, atomics=facts, **kw)) is None
    assert contention(evidence(100.0, nbytes=2.68e8, **kw)) is None  # no TTGIR: no atomic left once per thread
    # the same kernel where its programs' atomics do take the time: named, one per program
    named = contention(evidence(10.0, atomics=facts, **kw))
    assert named is not None and named.value == "4.1e+03" and "max/umin: 2 ops under exclusive masks" in named.name
    assert "(masked: at most)" not in named.name


def test_atomics_at_addresses_not_known_are_not_counted_as_one() -> None:
    # out_ptr + pid % 4: the distinct addresses depend on the program; a scalar in range(n): trips not known
    for name in ("max_mod.ttgir", "loops.ttgir"):
        facts = calls(name)
        assert contention(evidence(10.0, ctas=1 << 20, warps=4, atomics=facts, atomic_serial_ns=1.8)) is None


def test_the_repeat_by_warpgroups_follows_the_layouts_not_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    # chain split (BLOCK_M=64 on 8 warps): the scores lie over warpsPerCTA [8, 1], 2 copies: 1.60x the model's
    # tensor FLOPs (ncu counted 1.60x on the H100); its twin on 4 warps copies nothing
    split = [o for o in items("chain-split", "chain_split.ttgir", monkeypatch) if "repeated" in o.metric]
    (rep,) = split
    assert rep.name.startswith("Work repeated by warpgroups in attention: each of its 2 warpgroups (num_warps=8)")
    assert "1.60x the model's tensor FLOPs from the TTGIR's layouts" in rep.name and "warpsPerCTA [8, 1]" in rep.name
    assert not rep.structural and rep.change is not None and "num_warps=4" in rep.change
    whole = items("chain-whole", "chain_whole.ttgir", monkeypatch)
    assert not any("repeated" in o.metric for o in whole)
    # the same config (BLOCK_M=64 < 64 x 2 warpgroups) compiled to layouts that copy nothing: no item
    assert not any("repeated" in o.metric for o in items("chain-split", "chain_whole.ttgir", monkeypatch))


def test_at_d512_the_repeat_is_ranked_with_what_was_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    # mla_decode v2 (d=512): one warpgroup would hold 64 x 512 fp32 accumulators, 256 per thread: no tile change, but
    # a rewrite reaches it: not structural
    (rep,) = [o for o in items("mla_decode-v2-s16", "mla_v2_d512.ttgir", monkeypatch) if "repeated" in o.metric]
    assert not rep.structural and rep.change is not None
    assert "needs 256 fp32 registers per thread" in rep.change and "Routes that reach it:" in rep.change


@pytest.mark.skipif(HAS_CUDA, reason="the CPU interpreter path")
def test_addresses_that_depend_on_the_program_are_counted_where_the_access_run_traced_them() -> None:
    # out + pid % 4 under the CPU interpreter, every program traced: 4 distinct addresses for the catalogue
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import triton
    import triton.language as tl

    from kbench.analysis.access import sites
    from kbench.analysis.access_facts import Predicted
    from kbench.capture import access

    @triton.jit  # type: ignore[untyped-decorator]
    def spread_sum(x, out, B: tl.constexpr):
        pid = tl.program_id(0)
        tl.atomic_add(out + pid % 4, tl.sum(tl.load(x + pid * B + tl.arange(0, B)), axis=0))

    x, out = torch.ones(64 * 32), torch.zeros(4)
    with access.traced(access.allocations_of({"x": x, "out": out})) as trace:
        spread_sum[(64,)](x, out, B=32)
    predicted = Predicted.of(sites(trace.accesses), "at the test's size, 64 of 64 programs traced")
    assert predicted is not None and list(predicted.atomic_addresses.values()) == [4]
    (line,) = predicted.atomic_addresses
    # what the TTGIR says of that call (max_mod.ttgir: a scalar per program, its address depending on the program)
    call = AtomicOp(op="fadd", line=line, scalar=True, elements=1, masked=False, trips=1, address=["program"])
    kw: dict[str, Any] = {"ctas": 1 << 20, "warps": 1, "atomic_serial_ns": 1.8, "atomics": [call]}
    assert contention(evidence(800.0, **kw)) is None  # not traced: the addresses are not known
    found = contention(evidence(800.0, predicted=predicted, **kw))
    assert found is not None and "at 4 addresses take 472 us serialized" in found.name
    assert "4 distinct addresses predicted on CPU at the test's size" in found.name


ISSUE42 = DATA / "issue42_h100"


def issue42(run: str, compiled: str, *, ttgir: bool = True) -> list[Opportunity]:
    """Every item event mode names for a run of issue 42's pairs (H100, Triton 3.6), its tiling record given the
    facts of the TTGIR and PTX that run compiled (compiled/<run>/): as a live run records them now. ``ttgir=False``:
    the PTX's facts alone (a record without the TTGIR's)."""
    folder = ISSUE42 / "event" / run
    result = json.loads((folder / "result.json").read_text())
    plan = load_version(result["kernel"], result["version"], [str(DATA / "validation")]).from_values(result["params"])
    ctx = Context(plan, load_devices(), resolve(load_devices(), result["device"]))
    tiling = {p.stem: json.loads(p.read_text()) for p in (folder / "tiling").glob("*.json")}
    code = ISSUE42 / "compiled" / run / compiled
    for record in tiling.values():
        record["instructions"] = instruction_mix(code.with_suffix(".ptx").read_text()).model_dump(mode="json")
        if ttgir:
            record.update(compiled_facts(code.with_suffix(".ttgir").read_text()))
    seen: list[Opportunity] = []
    ranked = opportunities.rank

    def spy(candidates: Any, **kw: Any) -> Any:
        seen.extend(c for c in candidates if c is not None)
        return ranked(candidates, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(opportunities, "rank", spy)
        capture = EVENT.open(folder / "timings.json")
        EVENT.analyse(type(capture)(files=capture.files, live=False, tiling=tiling), ctx)
    return sorted(seen, key=lambda o: -o.gain_pct)


def test_the_h100_scalar_contention_pair() -> None:
    # scalar_atomic per_program on the H100: 524,288 programs x ONE scalar atomic (TTGIR: f32 result; PTX: predicated
    # to thread 0) into out[0]: 944 us serialized at 1.8 ns of the 925-us stage (the code before said "too few bytes
    # in flight"); the wide twin (4096 programs: 7.4 us of 26 us) gets no atomics item
    top = issue42("scalar_atomic-per_program", "tile_sum_kernel")[0]
    assert top.name.startswith("Atomic contention in sum at _common.py:19: 5.24e+05 atomics executed at 1 address")
    assert "524288 programs x one scalar atomic per program (TTGIR)" in top.name and top.value == "5.24e+05"
    assert top.change is not None and "a larger BLOCK" in top.change and "BLOCK=32" in top.change
    assert 90.0 < top.gain_pct < 100.0  # realized: 1 - 25.8 / 924.8 = 97.2%
    for ttgir in (True, False):
        wide = issue42("scalar_atomic-wide", "tile_sum_kernel", ttgir=ttgir)
        assert not any("atomic" in o.metric for o in wide), [o.name for o in wide]


def test_the_h100_absmax_pair_gets_no_atomics_item() -> None:
    # one scalar tl.atomic_max per program (two exclusive ops, each predicated to thread 0): 4096 programs, 7.4 us
    # serialized; the code before read "2 per thread" from the PTX. Neither twin gets an atomics item, from the TTGIR
    # or from the PTX alone; ragged chunked's atomics go to an address loaded from memory: not counted as one
    for run in ("absmax-fused", "absmax-torch_abs"):
        for ttgir in (True, False):
            found = issue42(run, "absmax_kernel", ttgir=ttgir)
            assert not any("atomic" in o.metric for o in found), [o.name for o in found]
    assert not any("atomic" in o.metric for o in issue42("ragged-chunked", "chunk_kernel"))


def test_a_run_folder_made_before_reads_its_compiled_kernel_again(tmp_path: Path) -> None:
    # absmax torch_abs's event run (its record holds the PTX's counts of before: 2 atomics, none said to be one
    # thread's) with the TTGIR and PTX that run kept in compiled/<stage>/: read back, the record says one scalar
    # atomic_max per program and both atomics predicated to one thread
    from kbench.analysis import records
    from kbench.report.folder import tiling_beside

    shutil.copytree(ISSUE42 / "event" / "absmax-torch_abs", tmp_path / "run")
    (tmp_path / "run" / "compiled" / "amax").mkdir(parents=True)
    for suffix in ("ttgir", "ptx"):
        code = ISSUE42 / "compiled" / "absmax-torch_abs" / f"absmax_kernel.{suffix}"
        shutil.copy(code, tmp_path / "run" / "compiled" / "amax" / code.name)
    before = json.loads((tmp_path / "run" / "tiling" / "amax.json").read_text())
    assert "atomics" not in before and "one_thread_atomics" not in before["instructions"]
    record = records.launches(tiling_beside(tmp_path / "run" / "timings.json"), tmp_path / "run")["amax"]
    (call,) = record["atomics"]
    assert call["scalar"] and call["lowered"] == 2 and call["address"] == [] and call["line"] == "_common.py:21"
    assert record["instructions"]["atomics"] == 2 and record["instructions"]["one_thread_atomics"] == 2
    # without the compiled kernel, the record stays as it was
    shutil.rmtree(tmp_path / "run" / "compiled")
    assert "atomics" not in tiling_beside(tmp_path / "run" / "timings.json")["amax"]
