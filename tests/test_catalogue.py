"""Catalogue entries on made-up evidence, for the edges the H100/H200 pairs do not reach: when an entry must stay
silent, and its gain's cap."""

from __future__ import annotations

from typing import Any

from kbench.analysis import opportunities as op
from kbench.analysis.roofline import Ceilings
from kbench.analysis.stages import StageFigures
from kbench.analysis.timing_stats import TimingStats

ROOF = Ceilings(tflops=50.0, gbps=4000.0, source="test")


def evidence(us: float, nbytes: float = 4e7, bottleneck: Any = "Memory", **kw: Any) -> op.Evidence:
    f = StageFigures(
        name="s",
        precision="fp32",
        flops=0.0,
        dram_bytes=nbytes,
        timing=TimingStats.of([us]),
        duration_us=us,
        tflops=None,
        gbps=None,
        intensity=0.0,
        bottleneck=bottleneck,
    )
    return op.Evidence(stage=f, total_us=us, practical=ROOF, **kw)


def test_launch_bound_needs_many_short_launches() -> None:
    # 64 launches of 5 us; the work at the roof takes 10 us: one launch would take 10 us
    found = op.launch_bound(evidence(320.0, launches=64))
    assert found is not None and found.name == "Launch-bound stage s: 64 kernel launches of 5.0 us each"
    assert abs(found.gain_pct - 100.0 * 310.0 / 320.0) < 1e-9
    assert op.launch_bound(evidence(12.0, launches=2)) is None  # a zeroed output and the kernel
    assert op.launch_bound(evidence(64 * 30.0, nbytes=4e9, launches=64)) is None  # 30 us launches: not short
    assert op.launch_bound(evidence(320.0, nbytes=1.1e9, launches=64)) is None  # the work takes most of the time


def test_uncoalesced_needs_wasted_sectors() -> None:
    assert op.uncoalesced(evidence(100.0, ld_sectors=1e6, ld_use=32.0, st_sectors=1e6, st_use=32.0)) is None
    assert op.uncoalesced(evidence(100.0, ld_sectors=1e6, ld_use=0.0)) is None  # no such loads (cp.async, TMA)
    found = op.uncoalesced(evidence(100.0, ld_sectors=8e6, ld_use=4.0, st_sectors=1e6, st_use=32.0))
    # sectors needed: 8e6 x 4/32 + 1e6 = 2e6 of 9e6 (77.8% of the time as a share of what the stage moves); the 7e6
    # wasted sectors (224 MB) take 56 us at the 4000 GB/s roof, which caps it
    assert found is not None and found.metric == "s.global_ld_bytes_per_sector"
    assert abs(found.gain_pct - 100.0 * min(1 - 2e6 / 9e6, 7e6 * 32 / 4000e3 / 100.0)) < 1e-9
    wide = op.uncoalesced(evidence(100.0, ld_sectors=8e6, ld_use=4.0, st_sectors=1e6, st_use=32.0, moved_bytes=2e9))
    assert wide is not None and abs(wide.gain_pct - 100.0 * 7e6 * 32 / 2e9) < 1e-9  # a share of the 2 GB it moved


def test_a_tma_fed_kernels_few_scalar_loads_are_not_its_distance() -> None:
    # mla_decode v11 on the H100 (ncu mode, 2026-11-27, b=32 s=16 t=4096 h=16): its tiles come by TMA, outside the
    # load sectors; ncu counted 3200 load sectors at 4 B used (the work item's scalars, read by every thread) and
    # 523853 store sectors at 16 B (the output in the wgmma layout), against 167 MB moved. Before, the item took the
    # stage's whole distance (46.6% of 172.3 us, Top 1 and the only step of the waterfall)
    counts: dict[str, Any] = {"ld_sectors": 3200.0, "ld_use": 4.0, "st_sectors": 523853.0, "st_use": 15.9985}
    found = op.uncoalesced(evidence(172.32, nbytes=1.688e8, moved_bytes=1.671e8, **counts))
    assert found is not None and found.gain_pct < 2.0  # 8.5 MB of wasted sectors: 2.1 us at 4000 GB/s


def test_the_partial_wave_is_not_named_on_a_memory_bound_stage() -> None:
    kw: dict[str, Any] = {"sm_count": 132, "ctas": 144, "ctas_per_sm": 1.0, "ctas_limiter": "registers"}
    assert op.tail(evidence(1000.0, **kw)) is None
    found = op.tail(evidence(1000.0, bottleneck="Compute", **kw))
    assert found is not None and "(1 per SM, limited by registers, on 132 SMs)" in found.name


def test_an_item_whose_gain_rounds_to_zero_is_left_out_and_named_in_the_note() -> None:
    def item(name: str, gain: float, stop: bool = False) -> op.Opportunity:
        return op.Opportunity(name=name, gain_pct=gain, metric="m", value="v", named=True, stop=stop)

    stop, tiny, real = item("add: stop", 0.01, stop=True), item("Uncoalesced stores in add", 0.02), item("X", 4.0)
    found, note = op.rank([tiny, stop, None, real], fewer=lambda n: f"Only {n} listed.")
    assert found == [real, stop]  # the stop line stays whatever its gain
    assert note == "Only 2 listed. Left out, each under 0.05% of the plan's time: Uncoalesced stores in add."
    alone, alone_note = op.rank([tiny], fewer=lambda n: f"Only {n} listed.")
    assert alone == [tiny] and alone_note == "Only 1 listed."  # nothing else: the one item is kept


def test_the_unexplained_rest_is_said_under_the_list_when_it_is_not_in_it() -> None:
    def item(name: str, gain: float, rest: bool = False) -> op.Opportunity:
        return op.Opportunity(name=name, gain_pct=gain, metric="m", value="v", named=not rest, rest=rest, change="c")

    named = [item("A", 30.0), item("B", 20.0), item("C", 10.0)]
    rest = item("Unexplained in s: 5.0 of its 65.0 points", 5.0, rest=True)
    found, note = op.rank([*named, rest], fewer=lambda n: f"Only {n} listed.")
    assert found == named and note == "Unexplained in s: 5.0 of its 65.0 points (est. 5.0%): c."


def test_bytes_in_flight_follow_littles_law() -> None:
    from kbench.analysis.ptx import InstructionMix

    mix = InstructionMix(
        tensor_ops=[], operand_precision=None, global_loads={16: 1}, global_stores={16: 1}, cp_async={},
        tma_loads=0, tma_stores=0, local=0, atomics=0, shared_atomics=0, float_conversions=0, fp32_math=1,
        half_math=0, special=0, barriers=0,
    )  # fmt: skip
    # 132 one-warp CTAs, one 16-byte load per thread: 512 B per SM; 4000 GB/s x 100 ns x 1.5 / 132 = 4545 B needed
    kw: dict[str, Any] = {"instructions": mix, "warps": 1, "ctas": 132, "sm_count": 132, "dram_latency_ns": 100.0}
    slow = 4e7 / (600e9) * 1e6  # the stage moved 600 GB/s: under what 512 B per SM allow (676 GB/s)
    found = op.diagnose(evidence(slow, **kw))[0]
    assert found.metric == "s.bytes_in_flight_per_sm" and found.value == "512" and found.named
    assert abs(found.gain_pct - 100.0 * (1 - 4e7 / 4000e9 * 1e6 / slow)) < 1e-9  # the distance to the roof
    # eight warps a CTA and 8 CTAs per SM: 32 KiB, enough
    assert op.diagnose(evidence(slow, **{**kw, "warps": 8, "ctas": 1056}))[0].metric != "s.bytes_in_flight_per_sm"
    # a stage moving far more than its static loads allow is not this case (the count misses its loads)
    assert op.diagnose(evidence(4e7 / 3000e9 * 1e6 * 1.2, **kw))[0].metric != "s.bytes_in_flight_per_sm"


def _mix(**kw: Any) -> Any:
    from kbench.analysis.ptx import InstructionMix, TensorOp

    base: dict[str, Any] = {
        "tensor_ops": [], "operand_precision": None, "global_loads": {}, "global_stores": {}, "cp_async": {},
        "tma_loads": 0, "tma_stores": 0, "local": 0, "atomics": 0, "shared_atomics": 0, "float_conversions": 0,
        "fp32_math": 0, "half_math": 0, "special": 0, "barriers": 0,
    }  # fmt: skip
    ops = [TensorOp(**o) for o in kw.pop("ops", [])]
    return InstructionMix(**{**base, "tensor_ops": ops, **kw})


def test_unpipelined_loads_need_num_stages_1() -> None:
    from kbench.analysis.catalogue import compute

    mm = {"op": "wgmma", "shape": "m64n128k16", "types": "f32.f16.f16", "count": 8, "a_from": "shared"}
    mix = _mix(ops=[mm], global_loads={16: 4})
    e = evidence(1000.0, nbytes=1e6, bottleneck="Compute", instructions=mix, num_stages=1)
    assert compute.unpipelined(e) is not None
    # num_stages=3 and still no async copy: the kernel has no loop to pipeline (one tile), not this mechanism
    assert compute.unpipelined(evidence(1000.0, nbytes=1e6, instructions=mix, num_stages=3)) is None


def test_bf16_work_on_the_fp16_path_is_no_precision_finding() -> None:
    from kbench.analysis.catalogue import compute
    from kbench.analysis.devices import load_devices

    spec = load_devices().devices["H100_SXM"]
    roofs = spec.practical()
    f = evidence(1000.0, nbytes=1e6, bottleneck="Compute").stage.model_copy(update={"precision": "bf16", "flops": 1e12})
    kw: dict[str, Any] = {"practical_by_precision": roofs, "limits": spec.limits}
    fp16 = op.Evidence(stage=f, total_us=1000.0, practical=roofs["bf16"], tensor_paths={"fp16": 1e12}, **kw)
    assert compute.tensor_precision(fp16) is None  # 695 measured against 793, but one rate per clock (4096)
    tf32 = op.Evidence(stage=f, total_us=1000.0, practical=roofs["bf16"], tensor_paths={"tf32": 1e12}, **kw)
    found = compute.tensor_precision(tf32)
    assert found is not None and found.value == "tf32"


def test_every_numeric_trigger_the_catalogue_writes_has_a_unit() -> None:
    # the trigger metrics written in the catalogue and the gain models, by their name after the stage's
    import re
    from pathlib import Path

    from kbench.analysis import catalogue
    from kbench.analysis.catalogue.evidence import UNITS

    words = {"tensor_core_work", "tensor_precision", "tensor_instruction", "wgmma_serialized"}  # a word (none, tf32,
    # mma.sync, C7512): no unit
    root = Path(catalogue.__file__).parent
    others = ("gains.py", "opportunities.py", "fusion.py", "access_figures.py", "figures.py")
    sources = [*root.glob("*.py"), *(root.parent / name for name in others)]
    text = "".join(p.read_text() for p in sources)
    # f"{e.name}.grid_ctas", f"{c.stage}.{metric}" (dram_pct / compute_pct), "plan.gpu_idle_pct"
    stage = r"\{(?:e\.name|c\.stage|name|g\.stages\[-?\d\]\.name)\}"  # what a trigger's metric starts with
    written = set(re.findall(stage + r"\.([a-z][a-z0-9_]*)", text)) | set(re.findall(r"\"plan\.(\w+)\"", text))
    written = written - {"md"} | {"dram_pct", "compute_pct"}  # "source/{e.name}.md" is a file; unit_headroom's two
    assert len(written) >= 30
    prefixed = ("stall_", "line_", "global_")  # the stall's unit given with it; line_<n>_share: %; global_{op}_...
    assert {m for m in written if m not in UNITS and m not in words and not m.startswith(prefixed)} == set()
    assert {f"global_{o}_bytes_per_sector{p}" for o in ("ld", "st") for p in ("", "_predicted")} <= set(UNITS)
    op_ = op.Opportunity(name="n", gain_pct=1.0, metric="s.stall_barrier", value="2.2", unit="samples")
    assert op_.trigger_unit == "samples"
    assert op.Opportunity(name="n", gain_pct=1.0, metric="s.line_58_share", value="61.0%").trigger_unit == "%"


def test_a_gluon_kernels_changes_never_name_tritons_knobs() -> None:
    """Every stall reason's change, every line cause's and the launch, compute and memory entries' for a Gluon
    kernel (its launch record's language) name Gluon's levers: its layouts, its own block constexprs, mbarrier and
    TMA stages; never tl.* calls, num_stages, autotuning or tl.debug_barrier."""
    import re
    from dataclasses import replace

    from kbench.analysis.catalogue import compute, launch, lines, memory, stalls
    from kbench.analysis.lines import Line
    from kbench.analysis.ptx import InstructionMix

    triton = re.compile(r"\btl\.|num_stages|autotun|triton\.Config|debug_barrier|\bTriton (?:then|emits?|splits)")
    tile = {"BLOCK_M": 64, "BLOCK_N": 64}
    said = [stalls._lever(s, evidence(100.0, language="gluon", tile=tile)) for s in stalls.STALLS.values()]
    assert "larger block constexprs (now BLOCK_M=64, BLOCK_N=64)" in " ".join(said)
    ops = {
        "division": {"I2F.U32.RP": 1.0, "MUFU.RCP": 1.0, "IMAD.HI.U32": 1.0},
        "atomics": {"ATOMG.E.ADD": 1.0},
        "special": {"MUFU.EX2": 4.0},
        "shared": {"LDS.128": 4.0},
        "alu": {"IADD3": 4.0},
        "fma": {"FFMA": 4.0},
    }
    for name, opcodes in ops.items():
        found = lines.cause(Line(file="k.py", line=1, code="x", instructions=4.0, opcodes=opcodes), 1.0)
        assert found is not None, name
        said.append(found.lever(True))
        assert found.lever(False) == found.change
    mm = {"op": "mma", "shape": "m16n8k16", "types": "f32.bf16.bf16.f32", "count": 8, "a_from": "registers"}
    mix = InstructionMix.model_validate({**_mix(ops=[]).model_dump(), "tensor_ops": [mm]})
    gluon: dict[str, Any] = {"language": "gluon", "tile": tile}
    mma = evidence(1000.0, nbytes=1e6, instructions=mix, arch="Hopper (sm_90)", warps=4, **gluon)
    found_items = [
        launch.spills(evidence(1000.0, spilled=40.0, registers=255.0, warps=4, **gluon)),
        memory.uncoalesced(evidence(100.0, ld_sectors=8e6, ld_use=4.0, **gluon)),
        compute.warp_mma(replace(mma, stage=mma.stage.model_copy(update={"flops": 1e12}))),
    ]
    assert all(o is not None for o in found_items)
    said += [o.change or "" for o in found_items if o is not None]
    assert [s for s in said if triton.search(s)] == []
    assert all(set(re.findall(r"\bBLOCK_\w+", s)) <= set(tile) for s in said)
    # the same entries for a Triton kernel keep Triton's terms
    triton_spills = launch.spills(evidence(1000.0, spilled=40.0, registers=255.0, warps=4))
    assert triton_spills is not None and "more num_warps" in (triton_spills.change or "")
