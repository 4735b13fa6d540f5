"""Memory accesses traced under Triton's CPU interpreter (kbench.capture.access) and what they say per source line
(kbench.analysis.access), on shipped kernels and validation kernels whose access patterns are known, and on a copy
of vector_add with a planted out-of-bounds read (tests/data/bad_kernels/oob): caught with its line and program, and
masked off so the interpreter does not crash."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, HAS_CUDA

pytestmark = pytest.mark.skipif(HAS_CUDA, reason="the CPU interpreter path")


def traced(package: str, version: str, paths: list[str] | None = None, **values: Any) -> list[Any]:
    """The sites of every stage of a plan at its CPU check sizes (or ``values``), run under the interpreter."""
    os.environ["TRITON_INTERPRET"] = "1"
    from kbench.analysis.access import sites
    from kbench.capture import access
    from kbench.capture.check import cpu_values
    from kbench.capture.prepare import built
    from kbench.plan.discovery import load_version

    cls = load_version(package, version, paths)
    merged, _ = cpu_values(cls, {k: str(v) for k, v in values.items()})
    plan = cls.from_values(merged)
    ws = plan.setup("cpu", 0)
    with access.traced(access.allocations_of(ws)) as trace:
        for stage in plan.checked_stages():
            built(plan, stage, ws, dict(stage.tuning[0])).fn()
    return sites(trace.accesses)


def test_vector_add_streams_whole_sectors_with_its_tail_masked() -> None:
    loads_a, loads_b, store = traced("vector_add", "base")  # n=5003 at the check size, BLOCK=1024: 5 programs
    assert [s.kind for s in (loads_a, loads_b, store)] == ["load", "load", "store"]
    assert [Path(s.site.rsplit(":", 1)[0]).name for s in (loads_a, store)] == ["base.py", "base.py"]
    assert [int(s.site.rsplit(":", 1)[1]) for s in (loads_a, loads_b, store)] == [18, 19, 21]
    for s in (loads_a, loads_b, store):
        assert (s.calls, s.programs, s.lanes, s.active, s.bytes) == (5, 5, 5120, 5003, 4 * 5003)
        assert s.stride_bytes == 4 and s.reuse == 1.0 and s.out_of_bounds == 0
        assert s.masked_pct == pytest.approx(100 * 117 / 5120)
        assert s.bytes_per_sector == pytest.approx(32.0, abs=0.05)  # whole sectors, but the tail's last one


def test_a_column_read_uses_4_bytes_of_each_sector_and_its_tiled_twin_most() -> None:
    """The naive transpose reads a column of x (neighbouring lanes a row apart: 4 useful bytes per 32-byte sector)
    and writes a row of y; the tiled version reads rows (tests/data/validation/transpose, its H200 pair)."""
    naive = {s.kind: s for s in traced("transpose", "naive", [str(DATA / "validation")])}
    tiled = {s.kind: s for s in traced("transpose", "tiled", [str(DATA / "validation")])}
    cols = 130  # the plan's CPU check size: a row of x is 130 floats
    assert naive["load"].stride_bytes == 4 * cols and naive["load"].bytes_per_sector == 4.0
    assert naive["store"].stride_bytes == 4 and (naive["store"].bytes_per_sector or 0) > 20
    assert tiled["load"].stride_bytes == 4 and (tiled["load"].bytes_per_sector or 0) > 20


def test_a_planted_out_of_bounds_read_is_caught_with_its_line_and_program() -> None:
    facts = traced("oob", "base", [str(DATA / "bad_kernels")])
    wild = [s for s in facts if s.out_of_bounds]
    assert len(wild) == 1
    (bad,) = wild
    assert bad.kind == "load" and bad.site.endswith("oob/base.py:17") and bad.function == "add_kernel"
    assert bad.out_of_bounds == 64 and bad.first_oob_program == (4, 0, 0)  # the last program's 64 extra lanes
    assert all(s.out_of_bounds == 0 for s in facts if s is not bad)


def test_reuse_across_programs_shows_in_a_tiled_matmul() -> None:
    """matmul v2 at its check size: 2 programs share A's rows (grid over N) or B's columns."""
    facts = traced("matmul", "v2")
    loads = [s for s in facts if s.kind == "load"]
    assert len(loads) == 2 and max(s.reuse or 0 for s in loads) >= 2.0


@pytest.mark.slow
@pytest.mark.parametrize("version", ["naive", "tiled"])
def test_the_cpu_prediction_matches_what_ncu_measured_on_the_gpu(version: str) -> None:
    """Bytes used per 32-byte sector, predicted on a CPU at a scaled-down point whose rows are whole sectors
    (256 x 256 floats), against ncu's measurement of the same kernels at 8192 x 8192 on an H200
    (tests/data/validation_h200: l1tex sectors and requests of global loads and stores): naive 4 / 32, tiled 32 / 32."""
    from kbench.analysis import ncu
    from kbench.analysis.counters import combine

    predicted = {s.kind: s.bytes_per_sector for s in traced("transpose", version, [str(DATA / "validation")],
                                                             rows=256, cols=256)}  # fmt: skip
    capture = DATA / "validation_h200" / f"transpose-{version}" / "annotation" / "profile.ncu-rep"
    measured = combine("transpose", ncu.kernels(capture))
    assert predicted["load"] == pytest.approx(measured.ld_use, abs=0.5)
    assert predicted["store"] == pytest.approx(measured.st_use, abs=0.5)


def test_kbench_check_fails_an_out_of_bounds_read_naming_its_line_and_program(cli: Any) -> None:
    done = cli("check", "oob", "--kernel-path", str(DATA / "bad_kernels"))
    assert done.returncode == 5
    (line,) = [x for x in done.stdout.splitlines() if "FAIL" in x]
    assert line.endswith(
        f"FAIL: out of bounds: 64 lane(s) of the load at {DATA / 'bad_kernels' / 'oob' / 'base.py'}:17 (add_kernel) "
        "reach outside its tensor, first in program (4, 0, 0)"
    )
    assert cli("check", "vector_add", "base").returncode == 0  # the shipped original passes


def test_only_lanes_running_past_a_known_tensor_are_out_of_bounds() -> None:
    import numpy as np

    from kbench.capture.access import _outside

    a = np.arange(1000, 1000 + 8 * 4, 4, dtype=np.int64)  # 8 fp32 lanes from byte 1000
    on = np.ones(8, dtype=bool)
    assert _outside(a, on, [(1000, 1024)], 4)[0].tolist() == [False] * 6 + [True] * 2  # the last two run past 1024
    assert not _outside(a, on, [(5000, 6000)], 4)[0].any()  # memory no workspace tensor holds: not judged
    assert not _outside(a, on & (np.arange(8) < 6), [(1000, 1024)], 4)[0].any()  # masked lanes never count
    # a program whose lanes all left the tensor the same line reached before (an int32 offset that wrapped)
    wrapped = a - (1 << 32)
    wild, home = _outside(wrapped, on, [(1000, 1024)], 4, known=(1000, 1024))
    assert wild.all() and home == (1000, 1024)


def test_kbench_check_access_prints_each_load_and_store_line(cli: Any) -> None:
    done = cli("check", "transpose", "naive", "--kernel-path", str(DATA / "validation"), "--access")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "naive.py" in line]
    assert len(rows) == 2
    load, store = (r.split(" | ") for r in rows)
    assert load[1:] == ["load", "130", "36400", "93.2", "520", "4.0", "1.00", "0 |"]  # a column: one float per sector
    assert store[1:3] == ["store", "130"] and store[5] == "4"
    assert "predicted on CPU (Triton interpreter" in done.stdout


@pytest.mark.slow
def test_which_program_touched_each_element_and_its_picture(cli: Any, tmp_path: Path) -> None:
    """The naive transpose: program c reads column c of x and writes row c of y (the grid's first axis is the
    column); the pictures are written, one per workspace tensor."""
    os.environ["TRITON_INTERPRET"] = "1"
    from kbench.capture.check import check_plan, cpu_values
    from kbench.plan.discovery import load_version

    cls = load_version("transpose", "naive", [str(DATA / "validation")])
    plan = cls.from_values(cpu_values(cls, {})[0])  # rows 70, cols 130
    (first,) = check_plan(plan, "cpu", maps=True)
    maps = {t.name: t for t in first.touched}
    x, y = maps["x"], maps["y"]
    assert x.shape == (70, 130) and y.shape == (130, 70)
    import numpy as np

    columns = np.broadcast_to(np.arange(130), (70, 130))
    assert np.array_equal(x.read, columns) and (x.written == -1).all()  # column c read by program c, never written
    assert np.array_equal(y.written, columns.T) and (y.read == -1).all()
    done = cli("check", "transpose", "naive", "--kernel-path", str(DATA / "validation"),
               "--access-pictures", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    pictures = sorted(tmp_path.glob("*.png"))
    assert [p.name for p in pictures] == ["transpose-naive-x.png", "transpose-naive-y.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pictures)


def test_block_pointers_tensor_descriptors_and_atomics_are_traced() -> None:
    """Tensor-descriptor loads and stores reach the interpreter's masked load and store (their bounds as masks); an
    atomic add is traced as its own kind, its lanes out of bounds caught and masked off the same way."""
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import triton
    import triton.language as tl

    from kbench.analysis.access import sites
    from kbench.capture import access

    @triton.jit  # type: ignore[untyped-decorator]
    def descriptor_copy(x, y, M, N, BM: tl.constexpr, BN: tl.constexpr):
        d = tl.make_tensor_descriptor(x, [M, N], [N, 1], [BM, BN])
        e = tl.make_tensor_descriptor(y, [M, N], [N, 1], [BM, BN])
        e.store([tl.program_id(0) * BM, 0], d.load([tl.program_id(0) * BM, 0]))

    @triton.jit  # type: ignore[untyped-decorator]
    def scatter_add(x, out, n, B: tl.constexpr):
        offs = tl.program_id(0) * B + tl.arange(0, B)
        tl.atomic_add(out + offs, tl.load(x + offs, mask=offs < n, other=0.0), mask=offs < n + 8)  # 8 lanes too many

    x, y = torch.randn(100, 64), torch.zeros(100, 64)
    with access.traced(access.allocations_of({"x": x, "y": y})) as trace:
        descriptor_copy[(4,)](x, y, 100, 64, BM=32, BN=64)
    load, store = sites(trace.accesses)
    assert (load.kind, store.kind) == ("load", "store")
    assert load.active == 100 * 64 and load.lanes == 128 * 64 and load.stride_bytes == 4 and load.out_of_bounds == 0
    assert torch.equal(x, y)
    v, out = torch.randn(1000), torch.zeros(1000)
    with access.traced(access.allocations_of({"v": v, "out": out})) as trace:
        scatter_add[(4,)](v, out, 1000, B=256)
    facts = {s.kind: s for s in sites(trace.accesses)}
    assert facts["atomic"].out_of_bounds == 8 and facts["atomic"].first_oob_program == (3, 0, 0)
    assert torch.equal(out, v)  # the wild lanes were masked off: nothing past the tensor was written


def test_the_axis_whose_addresses_are_contiguous_is_laid_fastest() -> None:
    """A tile loaded as [BLOCK_D, BLOCK_N] from rows of 576 halves (mla_decode's K, dd[:, None] + cols[None, :] * 576):
    neighbouring addresses are one element apart along axis 0, so the compiler walks it fastest and the sectors are
    whole; a column of a row-major matrix (one axis, a row apart) stays a 4-of-32 read."""
    import numpy as np

    from kbench.analysis.access import _sectors, fastest_last

    dd, cols = np.arange(64), np.arange(16)
    k = 4096 + (dd[:, None] + cols[None, :] * 576) * 2  # bytes, fp16
    on = np.ones(k.shape, dtype=bool)
    moved, touched = _sectors(*fastest_last(k, on, 2), 2)
    assert moved / touched == 32.0
    moved, touched = _sectors(k, on, 2)  # the last axis taken as fastest: a warp spans 2 rows of 16 cache rows,
    assert moved / touched == 4.0  # each pair of lanes a row apart sharing a sector: 4 of every 32 bytes
    column = 4096 + np.arange(64) * 4 * 130
    assert fastest_last(column, np.ones(64, dtype=bool), 4)[0] is column
