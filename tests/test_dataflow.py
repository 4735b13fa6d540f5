"""The data-flow recorder on CPU tensors (PyTorch operators; Triton launches are watched the same way on a GPU,
checked by the committed H100 runs): which workspace tensors a stage read and wrote, and their bytes."""

from __future__ import annotations

import pytest

from kbench.capture import dataflow
from kbench.errors import UsageError

torch = pytest.importorskip("torch")


@pytest.mark.slow
def test_reads_writes_and_bytes_of_a_stage() -> None:
    ws = {"x": torch.ones(4, 8), "y": torch.zeros(4, 8), "unused": torch.zeros(3)}

    def stage() -> None:
        for r in range(4):  # views of x and y: their bytes add up to the whole tensors
            ws["y"][r].copy_(ws["x"][r] * 2)

    _, flow = dataflow.record(stage, ws, ws["y"])
    by = {t["name"]: t for t in flow["tensors"]}
    assert set(by) == {"x", "y"}
    assert by["x"] == {"name": "x", "bytes": 128, "read": True, "written": False, "output": False}
    assert by["y"]["written"] and by["y"]["output"] and by["y"]["bytes"] == 128
    assert flow["kernels"] == 8  # a multiply and a copy per row; the views launch nothing


def test_a_write_is_seen_from_the_bytes_changing() -> None:
    # as a Triton kernel writes: no operator reports it (here a write through numpy), only the bytes change
    ws = {"a": torch.zeros(16), "b": torch.arange(16.0)}

    def stage() -> None:
        ws["a"].add(0)  # the stage receives a and b (as a kernel would) ...
        ws["b"].add(0)
        ws["a"].numpy()[:8] = ws["b"].numpy()[:8] + 1  # ... and writes a behind PyTorch's back

    _, flow = dataflow.record(stage, ws)
    by = {t["name"]: t for t in flow["tensors"]}
    assert by["a"]["written"] and not by["b"]["written"]


def test_declared_data_flow_and_unknown_names() -> None:
    ws = {"x": torch.ones(10), "y": torch.empty(10)}
    flow = dataflow.declared(["x"], ["y"], ws, ws["y"])
    assert flow["source"] == "declared"
    assert [(t["name"], t["read"], t["written"], t["output"]) for t in flow["tensors"]] == [
        ("x", True, False, False),
        ("y", False, True, True),
    ]
    with pytest.raises(UsageError, match="z, not tensors of its workspace"):
        dataflow.declared(["z"], [], ws)


def test_workspace_names_nest() -> None:
    class Ws:
        def __init__(self) -> None:
            self.q = torch.zeros(1)
            self.cache = [torch.zeros(2), {"k": torch.zeros(3)}]

    assert sorted(dataflow.workspace_tensors(Ws())) == ["cache.0", "cache.1.k", "q"]


def test_the_checksum_is_summed_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    # a big tensor is summed a chunk at a time (the int64 sum casts its input); a write in any chunk is seen
    monkeypatch.setattr(dataflow, "CHUNK", 64)
    ws = {"a": torch.zeros(1000), "b": torch.ones(1000)}

    def stage() -> None:
        ws["a"].add(0)
        ws["b"].add(0)
        ws["a"].numpy()[900] = 1.0  # not seen by PyTorch: only the checksum of its 7th chunk changes

    _, flow = dataflow.record(stage, ws)
    assert {t["name"]: t["written"] for t in flow["tensors"]} == {"a": True, "b": False}
