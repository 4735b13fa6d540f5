"""tests/benchmark/mla_peers.py on the CPU: FlashInfer's CSR metadata from a block table, the paged causal reference
against a token-by-token loop, and the reasons a peer gives when it cannot run (no flashinfer, no FlashMLA build, a
layout FlashMLA does not take). No test needs flashinfer or a GPU."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tests.benchmark import mla_peers  # noqa: E402


def test_flashinfer_csr_lists_each_sequences_pages_in_order() -> None:
    table = torch.tensor([[3, 1, 7], [5, 2, 0]], dtype=torch.int32)
    lens = torch.tensor([130, 64], dtype=torch.int32)  # 3 pages (the last holds 2 rows), then exactly 1 page
    qo, kv_indptr, kv_indices, kv_len = mla_peers.flashinfer_csr(table, lens, s=2, page=64)
    assert qo.tolist() == [0, 2, 4]
    assert kv_indptr.tolist() == [0, 3, 4]
    assert kv_indices.tolist() == [3, 1, 7, 5]
    assert kv_len.tolist() == [130, 64]
    assert {t.dtype for t in (qo, kv_indptr, kv_indices, kv_len)} == {torch.int32}


def test_flashinfer_csr_refuses_a_table_too_narrow_for_the_lens() -> None:
    with pytest.raises(ValueError, match="needs 4 pages"):
        mla_peers.flashinfer_csr(torch.zeros(1, 3, dtype=torch.int32), torch.tensor([200]), s=1, page=64)


def test_reference_is_causal_over_the_paged_rows() -> None:
    g = torch.Generator().manual_seed(1)
    b, s, h, d, p, page = 2, 3, 2, 8, 4, 4
    lens = [10, 5]
    table = torch.tensor([[4, 0, 6], [2, 5, 1]], dtype=torch.int32)  # shuffled pages, the pool has 7
    pool = torch.randn(7, page, d + p, generator=g)
    q_nope, q_pe = torch.randn(b, s, h, d, generator=g), torch.randn(b, s, h, p, generator=g)
    got = mla_peers.reference(q_nope, q_pe, pool, table, torch.tensor(lens))
    for i in range(b):
        for j in range(s):  # token j of s sees rows 0 .. lens - s + j
            rows = [pool[int(table[i, r // page]), r % page] for r in range(lens[i] - s + j + 1)]
            kv = torch.stack(rows)
            for k in range(h):
                q = torch.cat([q_nope[i, j, k], q_pe[i, j, k]])
                w = (kv @ q / math.sqrt(d + p)).softmax(dim=0)
                assert torch.allclose(got[i, j, k], w @ kv[:, :d], atol=1e-5)


def test_rel_l2_is_relative() -> None:
    ref = torch.ones(2, 1, 1, 4)
    assert mla_peers.rel_l2(ref * 1.01, ref) == pytest.approx(0.01, rel=1e-4)


def _inputs(page: int = 64) -> tuple[Any, Any, Any, Any, Any]:
    b, s, h = 1, 1, 1
    q_nope = torch.zeros(b, s, h, 512, dtype=torch.bfloat16)
    q_pe = torch.zeros(b, s, h, 64, dtype=torch.bfloat16)
    pool = torch.zeros(2, page, 576, dtype=torch.bfloat16)
    return q_nope, q_pe, pool, torch.tensor([[1]], dtype=torch.int32), torch.tensor([page], dtype=torch.int32)


def test_missing_flashinfer_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # import flashinfer raises ImportError
    monkeypatch.setitem(sys.modules, "flashinfer.mla", None)
    res = mla_peers.peer_times({"b": 1}, *_inputs(), page=64, reps=1, peers=("flashinfer",))
    assert res == {"flashinfer": res["flashinfer"]}
    assert str(res["flashinfer"]).startswith("flashinfer not importable (ModuleNotFoundError")


def test_unbuilt_flashmla_is_a_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(mla_peers, "FLASHMLA_LIB", tmp_path / "libflashmla_capi.so")
    res = mla_peers.peer_times({}, *_inputs(), page=64, reps=1, peers=("flashmla",))
    assert str(res["flashmla"]).startswith("FlashMLA not built")


def test_flashmla_names_the_layout_it_does_not_take() -> None:
    res = mla_peers.peer_times({}, *_inputs(page=32), page=32, reps=1, peers=("flashmla",))
    assert str(res["flashmla"]).startswith("FlashMLA takes page 64, d 512, p 64 in bf16 only (here page 32")


def test_a_point_that_does_not_match_the_tensors_is_refused() -> None:
    with pytest.raises(ValueError, match="has h=128"):
        mla_peers.peer_times({"b": 1, "h": 128}, *_inputs(), page=64, reps=1)


def test_points_parse_from_their_slugs() -> None:
    assert mla_peers._parse_point("b32_s4_t4096_h128_ragged") == {"b": 32, "s": 4, "t": 4096, "h": 128, "ragged": True}
    with pytest.raises(Exception, match="a point is"):
        mla_peers._parse_point("b32_s4")
