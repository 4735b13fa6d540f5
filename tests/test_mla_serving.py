"""What serving passes to MLA decode, on CPU: ragged lengths from a fixed seed and a paged cache (a block table over a
shuffled pool) as plan parameters, the PyTorch baseline over them against the sequence-by-sequence reference, the
versions that take one contiguous cache refusing them in one line, and v9's cut of a batch into work items (every
tile attended once, split sequences' slots consecutive, the longest items first); v9's Gluon kernel compiles for
sm_90 at ragged, paged and split shapes."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from kbench.kernel.mla_decode._common import ServingWorkspace
from kbench.kernel.mla_decode.base import MlaDecodeTorch
from kbench.kernel.mla_decode.v9 import BLOCK_N, Cut, MlaDecodeServe
from kbench.plan.discovery import load_version
from tests.conftest import Ran


def test_ragged_lengths_are_seeded_within_their_range_and_shared_by_batch_sizes() -> None:
    plan = MlaDecodeTorch(b=64, s=1, t=16384, t_min=512)
    lens = plan.lens()
    assert len(lens) == 64 and all(512 <= n <= 16384 for n in lens) and len(set(lens)) > 32
    small = MlaDecodeTorch(b=8, s=1, t=16384, t_min=512)
    assert small.lens() == lens[:8]  # the first b draws of one sequence
    [stage] = plan.stages()
    assert stage.flops == pytest.approx(2 * 128 // 128 * 16 * sum(lens) * (576 + 512))  # s=1, h=16: the lengths' sum


def test_the_serving_parameters_stay_out_of_earlier_runs_names() -> None:
    base = load_version("mla_decode", "base")
    assert base.from_values({}).slug() == "b32_s16_t4096_h16_d512_p64_bfloat16"
    assert base.from_values({"t_min": "512", "page": "64"}).slug() == (
        "b32_s16_t4096_h16_d512_p64_t_min512_page64_bfloat16"
    )


@pytest.mark.parametrize(
    "extra", [["--t_min=40", "--t=200"], ["--page=16", "--t=150"], ["--page=16", "--t_min=20", "--t=150", "--s=2"]]
)
def test_the_baseline_serves_ragged_and_paged_batches(cli: Callable[..., Ran], extra: list[str]) -> None:
    done = cli("check", "mla_decode", "base", "--dtype=float32", *extra)
    assert done.returncode == 0, done.stderr + done.stdout
    assert ": PASS: " in done.stdout


def test_the_paged_pool_holds_each_sequence_once_in_a_shuffled_order() -> None:
    import torch

    plan = MlaDecodeTorch(b=5, s=1, t=300, t_min=10, page=16)
    ws = plan.setup("cpu", 0)
    assert isinstance(ws, ServingWorkspace)
    pages = plan.pages()
    assert ws.kv.shape == (sum(pages), 16, 576)
    used = torch.cat([ws.table[i, :n] for i, n in enumerate(pages)])
    assert sorted(used.tolist()) == list(range(sum(pages)))  # every block dealt once
    assert used.tolist() != sorted(used.tolist())  # not in order: the pool is shuffled
    assert all((ws.table[i, n:] == -1).all() for i, n in enumerate(pages))
    assert plan.cache_of(ws, 2).shape == (plan.lens()[2], 576)


@pytest.mark.parametrize(
    ("version", "args", "fragment"),
    [
        ("v7", ["--page=64"], "this version's kernels take one contiguous cache of t rows per sequence"),
        ("v3", ["--t_min=100"], "ragged (t_min) and paged (page) batches run on base and v9-v16"),
        ("base", ["--t_min=8", "--s=16"], "t_min=8: a ragged batch's shortest cache lies in [s, t] = [16, 4096]"),
        ("v9", ["--page=48"], "page=48: this version's paged cache takes blocks of a multiple of 64 rows"),
        ("v9", ["--dtype=float32"], "ragged and paged batches run on the Gluon kernel (16-bit types"),
        (
            "v11",
            ["--p=32"],
            "p=32: ragged and paged batches run on the Gluon kernel (16-bit types, d a multiple of 16 "
            "up to 512, p=64: the probabilities take a tile's rotary columns)",
        ),
    ],
)
def test_a_serving_batch_a_version_cannot_take_is_refused_in_one_line(
    cli: Callable[..., Ran], version: str, args: list[str], fragment: str
) -> None:
    done = cli("check", "mla_decode", version, *args)
    assert done.returncode == 2 and fragment in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("point", [{"b": 32, "s": 1, "t": 4096, "h": 128}, {"b": 32, "s": 1, "t": 16384, "h": 128,
                                   "t_min": 512, "page": 64}, {"b": 4, "s": 16, "t": 4096, "h": 16}])  # fmt: skip
def test_every_cut_attends_each_tile_once_longest_first(point: dict[str, int]) -> None:
    plan = MlaDecodeServe(**point)
    tiles = [-(-n // BLOCK_N) for n in plan.lens()]
    for cut in plan.cuts():
        covered: dict[int, list[tuple[int, int]]] = {}
        for seq, a, z, slot, first, count in cut.items:
            covered.setdefault(seq, []).append((a, z))
            assert 0 < z - a <= cut.bound
            assert (slot, first) == (-1, -1) if count == 1 else first <= slot < first + count
        for seq, n in enumerate(tiles):
            spans = sorted(covered[seq])
            assert spans[0][0] == 0 and spans[-1][1] == n and all(x[1] == y[0] for x, y in itertools.pairwise(spans))
        sizes = [z - a for _, a, z, *_ in cut.items]
        assert sizes == sorted(sizes, reverse=True)
        slots = sorted(
            slot for *_, slot, _, _ in [(i[0], i[1], i[2], i[3], i[4], i[5]) for i in cut.items] if slot >= 0
        )
        assert slots == list(range(cut.slots))


def test_the_cut_splits_where_one_pass_cannot_fill_the_gpu() -> None:
    # the compute-bound point: 32 x 4 row blocks fill 128 of 132 SMs, one chunk each, no combine; 128 heads at s=1:
    # 64 CTAs, so each sequence is cut in two (and a combine merges them)
    full = MlaDecodeServe(b=32, s=16, t=4096, h=16)
    assert [s.name for s in full.stages()] == ["attention"] and full.cuts()[0].slots == 0
    heads = MlaDecodeServe(b=32, s=1, t=4096, h=128)
    assert [s.name for s in heads.stages()] == ["partial", "combine"]
    assert {count for *_, count in heads.cuts()[0].items} == {2}
    assert heads.stages()[0].tuning[0]["CHUNK"] == heads.cuts()[0].bound


def test_the_makespan_model_prefers_even_work_over_idle_sms() -> None:
    one = Cut.of([64] * 32, 64, 2, 128, 512, 132)  # 64 CTAs of 64 tiles on 132 SMs
    two = Cut.of([64] * 32, 32, 2, 128, 512, 132)  # 128 CTAs of 32 tiles, and a combine
    assert two.est_us < one.est_us and two.slots == 64 and one.slots == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra", [[], ["--t_min=0", "--page=0", "--b=2"], ["--t_min=0", "--page=0", "--b=100", "--t=70"]]
)
def test_v9s_gluon_kernel_compiles_at_ragged_paged_and_split_shapes(cli: Callable[..., Ran], extra: list[str]) -> None:
    done = cli("check", "mla_decode", "v9", *extra)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "COMPILED, NOT RUN: mla_v9_kernel compiled for sm_90a" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("version", "extra", "configs"),
    [
        ("v11", [], 9),  # ragged, paged, split (the combine): 3 cuts x the seesaw's 3 variants
        ("v12", ["--t_min=0", "--page=0", "--b=32", "--s=1", "--t=2048", "--h=128"], 3),  # merged: the one merged cut
        ("v13", [], 3),  # the check's cut is four chunks a sequence: the combine chained in the one stage
        ("v14", [], 9),  # as v11, with v14's combine, a Gluon kernel, compiled too
        ("v15", ["--t_min=0", "--page=0", "--b=32", "--s=4", "--t=1000", "--h=16"], 6),  # merged: 4 and 3 chunks
        ("v16", [], 11),  # as v11: 9 cuts and variants, and v16's 3 combines (2 more checks)
        ("v17", [], 9),  # every cut merged in the kernel, cooperatively (the grid fits the SMs): one stage
    ],
)
def test_the_seesaw_kernel_compiles_with_the_combine_and_with_its_merge(
    cli: Callable[..., Ran], version: str, extra: list[str], configs: int
) -> None:
    from kbench.kernel.mla_decode.v12 import MlaDecodeSeesawMerged

    if version == "v12":  # the cut the check tunes is merged in the kernel (one stage, no combine)
        plan = MlaDecodeSeesawMerged(b=32, s=1, t=2048, h=128, d=64, p=64, dtype="float16")
        assert [s.name for s in plan.stages()] == ["attention"] and plan.merged(plan.cuts()[0])
    done = cli("check", "mla_decode", version, *extra)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "COMPILED, NOT RUN: mla_v11_kernel compiled for sm_90a" in done.stdout
    assert f"{configs} with Gluon kernels compiled for sm_90 and not run" in done.stdout
    if version == "v14":
        assert "; mla_v14_combine_kernel compiled for sm_90a" in done.stdout


def test_v13_chains_the_combine_in_one_stage_with_partials_in_the_outputs_type() -> None:
    import torch

    from kbench.kernel.mla_decode.v11 import MlaDecodeSeesaw
    from kbench.kernel.mla_decode.v13 import MlaDecodeSeesawChained

    v11 = MlaDecodeSeesaw(b=4, s=16, t=4096, h=16)
    v13 = MlaDecodeSeesawChained(b=4, s=16, t=4096, h=16)  # eight chunks a sequence: more than the merge takes
    partial, _ = v11.stages()
    [one] = v13.stages()
    assert one.kernels == ["mla_v11_kernel", "mla_v9_combine_kernel"] and not v13.merged(v13.cuts()[0])
    slots, rows, d = v13.cuts()[0].slots, v13.rows, v13.d
    assert v13.partial_bytes() == 2 and v11.partial_bytes() == 4
    # the partials (bf16) and their log-sum-exps (fp32), written and read back, on top of the attention's bytes
    assert one.dram_bytes == pytest.approx(
        partial.dram_bytes - slots * rows * (4 * d + 4) + 2 * slots * rows * (2 * d + 4)
    )
    assert v13.setup("cpu", 0).partial.dtype == torch.bfloat16 and v11.setup("cpu", 0).partial.dtype == torch.float32
    assert (
        MlaDecodeSeesawChained(b=4, s=16, t=4096, h=16, dtype="float16").setup("cpu", 0).partial.dtype == torch.float16
    )
    # where every cut is two chunks at most, v12's in-kernel merge serves (no combine)
    merged = MlaDecodeSeesawChained(b=32, s=1, t=4096, h=128)
    assert [s.kernels for s in merged.stages()] == [["mla_v11_kernel"]]


def test_v9_in_float32_runs_v6s_kernels_under_the_interpreter(cli: Callable[..., Ran]) -> None:
    done = cli("check", "mla_decode", "v9", "--dtype=float32", "--t_min=0", "--page=0")
    assert done.returncode == 0, done.stderr + done.stdout
    assert ": PASS: " in done.stdout and "COMPILED" not in done.stdout


def test_a_capture_made_before_the_serving_parameters_still_matches_its_plan() -> None:
    from pathlib import Path

    from kbench import pipeline
    from kbench.errors import UsageError

    made = {"kernel": "mla_decode", "version": "v2", "params": {"b": 32, "s": 16, "t": 4096, "h": 16, "d": 512,
                                                                  "p": 64, "dtype": "bfloat16"}}  # fmt: skip
    pipeline._same_plan(Path("old.ncu-rep"), made, MlaDecodeTorch(b=32, s=16, t=4096, h=16))  # t_min, page: defaults
    with pytest.raises(UsageError, match="give the capture's parameters"):
        pipeline._same_plan(Path("old.ncu-rep"), made, MlaDecodeTorch(b=32, s=16, t=4096, h=16, page=64))


def test_v10_merges_in_its_one_kernel_where_v9_launches_a_combine() -> None:
    from kbench.kernel.mla_decode.v10 import MlaDecodeMerged

    v9, v10 = MlaDecodeServe(b=32, s=1, t=4096, h=128), MlaDecodeMerged(b=32, s=1, t=4096, h=128)
    [one] = v10.stages()
    assert [s.name for s in v9.stages()] == ["partial", "combine"] and one.kernels == ["mla_v9_kernel"]
    partial = 4.0 * v10.cuts()[0].slots * v10.rows * (v10.d + 1)  # written, then read back by the last chunk
    assert one.dram_bytes == pytest.approx(v9.stages()[0].dram_bytes + partial)
    assert v10.setup("cpu", 0).arrived.shape == (32, 2)  # a counter per sequence and row block
    # where a sequence is cut into more than two chunks the last one would merge them serially: v9's combine runs
    assert [s.name for s in MlaDecodeMerged(b=4, s=16, t=4096, h=16).stages()] == ["partial", "combine"]
    ragged = MlaDecodeMerged(b=24, s=2, t=1500, h=128, t_min=600, page=64)  # the GPU tier's merged point
    assert len(ragged.stages()) == 1 and all(ragged.merged(c) for c in ragged.cuts()[:1])


@pytest.mark.parametrize("chunks", [2, 4, 8])
def test_v16s_combine_merges_every_group_of_chunks_as_v9s_does(chunks: int) -> None:
    """Under the interpreter: sequences of 1, 3, 5 and 8 chunks (one group of CHUNKS, several, a remainder), rows past
    a block's end and chunks whose rows saw nothing (log-sum-exp -inf), against the merge written in torch and v9's
    combine."""
    import torch

    from kbench.kernel.mla_decode.v9 import mla_v9_combine_kernel
    from kbench.kernel.mla_decode.v16 import mla_v16_combine_kernel

    gen = torch.Generator().manual_seed(7)
    counts, rows, d = [1, 3, 5, 8], 20, 64
    firsts = [-1, 0, 3, 8]  # a sequence in one chunk has no slots
    slots = 16
    part = torch.randn(slots, rows, d, generator=gen)
    lse = torch.randn(slots, rows, generator=gen) * 4
    lse[0:3, :3] = float("-inf")  # the second sequence's rows 0-2 saw nothing in any chunk: their output is 0
    lse[4, :7] = float("-inf")  # the third's rows saw nothing in some chunks
    lse[5, 3:9] = float("-inf")
    lse[8:10, 10:14] = float("-inf")  # the fourth's rows 10-13 see nothing in its first two chunks, then something
    part[lse == float("-inf")] = 0.0
    meta = torch.tensor([[f, c] for f, c in zip(firsts, counts, strict=True)], dtype=torch.int32)
    want = torch.zeros(len(counts), rows, d)
    for b, (f, c) in enumerate(zip(firsts, counts, strict=True)):
        if c > 1:
            w = torch.softmax(lse[f : f + c] * torch.log(torch.tensor(2.0)), dim=0).nan_to_num(0.0)
            want[b] = (w[:, :, None] * part[f : f + c]).sum(0)
    outs = []
    for kernel, extra in ((mla_v16_combine_kernel, {"CHUNKS": chunks}), (mla_v9_combine_kernel, {})):
        out = torch.zeros(len(counts), rows, d)
        kernel[(2, 1, len(counts))](part, lse, meta, out, rows, D=d, BLOCK_M=16, BLOCK_D=d, **extra)
        outs.append(out)
    torch.testing.assert_close(outs[0], want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    assert outs[0][1, :3].abs().max() == 0 and outs[0][0].abs().max() == 0  # nothing seen; one chunk: not written


def test_v16_tunes_its_combine_and_passes_chunks_to_it() -> None:
    from kbench.kernel.mla_decode.v16 import MlaDecodeSeesawWideCombine

    plan = MlaDecodeSeesawWideCombine(b=4, s=16, t=4096, h=16)  # eight chunks a sequence: the combine merges
    _, combine = plan.stages()
    assert combine.kernels == ["mla_v16_combine_kernel"] and len(combine.tuning) == 3
    assert all(cfg["CHUNKS"] in (4, 8) for cfg in combine.tuning)


@pytest.mark.parametrize(
    ("version", "h"), [*((v, 16) for v in ("v9", "v10", "v11", "v12", "v13", "v15", "v16", "v17")), ("v18", 4)]
)
def test_every_serving_kernel_reads_the_block_table_at_its_row_stride(
    version: str, h: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attention kernel's MAX_PAGES is the block table's row stride at every tuned cut of a ragged paged batch
    (v17's first cut passed the most chunks of a sequence there: sequence 0 read its pages, every other sequence
    another's where the two differ, and a contiguous cache, which reads no table, hid it); v17's merge gets that
    count as MOST; v18 at 12 query rows (its transposed kernel) gets neither MOST nor a cooperative launch."""
    cls: Any = load_version("mla_decode", version)
    plan = cls(b=5, s=3, t=1000, h=h, t_min=65, page=64)
    ws = plan.setup("cpu", 0)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    class Recorder:
        def __getitem__(self, grid: Any) -> Callable[..., None]:
            return lambda *args, **kwargs: calls.append((args, kwargs))

    monkeypatch.setattr(type(plan), "attention_kernel", lambda self: Recorder())
    stage = plan.stages()[0]
    for cfg in stage.tuning:
        stage.build(ws, cfg).fn()
    assert len(calls) == len(stage.tuning) > 1
    for (args, kwargs), cfg in zip(calls, stage.tuning, strict=True):
        cut = next(c for c in plan.cuts() if c.bound == cfg["CHUNK"])
        assert args[-1] == ws.table.shape[1], cfg  # MAX_PAGES
        if kwargs.get("COOP"):
            assert kwargs["MOST"] == max(count for *_, count in cut.items) and kwargs["arrived_ptr"] is ws.coop
    assert any(kw.get("COOP") for _, kw in calls) == (version == "v17")
    if version == "v18":
        assert plan.few_rows() and all("MOST" not in kw and kw.get("MERGE", 2) == 2 for _, kw in calls)
        assert {kw["BLOCK_M"] for _, kw in calls} == {16}
    # the cuts tell the two apart (at one-tile chunks the most chunks of a sequence is the table's width: 16)
    assert {max(count for *_, count in c.items) for c in plan.cuts()} - {ws.table.shape[1]}


def test_v18_transposes_the_product_only_where_a_sequence_has_sixteen_query_rows_or_fewer() -> None:
    """s * h <= 16: one warpgroup, BLOCK_M = 16 query rows as the wgmma's N, one row block, the whole latent width per
    tile, v12's merge of two chunks (not v17's cooperative one); more rows: v17 exactly."""
    from kbench.kernel.mla_decode.v17 import MlaDecodeSeesawCooperative
    from kbench.kernel.mla_decode.v18 import MlaDecodeTransposed, mla_v18_kernel

    few = MlaDecodeTransposed(b=32, s=1, t=4096, h=16)
    assert few.few_rows() and few.row_blocks() == 1 and few.merge_bound() == 2 and not few.cooperative()
    assert few.attention_kernel() is mla_v18_kernel
    # a latent width that is not whole 64-row tiles (d=32: the transposed output's M) stays with v17's kernel
    assert not MlaDecodeTransposed(b=2, s=1, t=256, h=16, d=32, p=64).few_rows()
    assert [s.kernels for s in few.stages()] == [["mla_v18_kernel"], ["mla_v16_combine_kernel"]]
    assert {c["BLOCK_M"] for c in few.stages()[0].tuning} == {16}
    two = MlaDecodeTransposed(b=66, s=1, t=2000, h=16)  # two chunks a sequence: merged in the kernel, one stage
    assert [s.kernels for s in two.stages()] == [["mla_v18_kernel"]] and two.merged(two.cuts()[0])
    for point in ({"b": 32, "s": 4, "t": 4096, "h": 16}, {"b": 32, "s": 1, "t": 4096, "h": 128}):
        v17, v18 = MlaDecodeSeesawCooperative(**point), MlaDecodeTransposed(**point)
        assert not v18.few_rows()
        assert [(s.name, s.kernels, s.tuning) for s in v18.stages()] == [
            (s.name, s.kernels, s.tuning) for s in v17.stages()
        ]


@pytest.mark.slow
def test_v18s_transposed_kernel_compiles_at_the_checks_ragged_paged_point(cli: Callable[..., Ran]) -> None:
    # the check's point has 12 query rows (s=3 h=4): the transposed kernel at its three cuts, and v16's combines
    done = cli("check", "mla_decode", "v18")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "COMPILED, NOT RUN: mla_v18_kernel compiled for sm_90a" in done.stdout
    assert "5 with Gluon kernels compiled for sm_90 and not run" in done.stdout
