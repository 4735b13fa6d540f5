"""The data-flow recorder on CPU tensors (PyTorch operators; Triton launches are watched the same way on a GPU,
checked by the committed H100 runs): which workspace tensors a stage read and wrote, and their bytes."""

from __future__ import annotations

from typing import Any

import pytest

from kbench.capture import dataflow
from kbench.errors import UsageError
from tests.conftest import DATA

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


def recorded(package: str, version: str) -> dict[str, Any]:
    """Each stage's data-flow record of a validation plan at its CPU check sizes, its Triton kernels run by the
    interpreter (conftest switches it on without a GPU), as the capture records it on the GPU."""
    from kbench.capture.check import cpu_values
    from kbench.capture.prepare import built
    from kbench.plan.discovery import load_version

    cls = load_version(package, version, [str(DATA / "validation")])
    plan = cls.from_values(cpu_values(cls, {})[0])
    ws = plan.setup("cpu", 0)
    out = {}
    for stage in plan.checked_stages():
        out[stage.name] = dataflow.record(built(plan, stage, ws, dict(stage.tuning[0])).fn, ws, plan.output(ws))[1]
    return out


def test_each_launch_records_the_tensors_it_read_and_wrote() -> None:
    # the split row sum: partial_kernel writes partials (rows x 8 fp32), combine_kernel reads them
    flow = recorded("splitk", "serial_combine")["rowsum"]
    rows, cols = 64, 8192  # its check sizes
    assert flow["launches"] == [
        {
            "kernel": "partial_kernel",
            "reads": [{"name": "x", "bytes": rows * cols * 4}],
            "writes": [{"name": "partials", "bytes": rows * 8 * 4}],
        },
        {
            "kernel": "combine_kernel",
            "reads": [{"name": "partials", "bytes": rows * 8 * 4}],
            "writes": [{"name": "out", "bytes": rows * 4}],
        },
    ]
    assert "launches_cut" not in flow and flow["kernels"] == 2


def test_a_temporary_the_stage_allocates_is_recorded_between_its_launches() -> None:
    # x.float() before the kernel: PyTorch's copy writes an fp32 temporary that axpb_kernel reads
    flow = recorded("convert", "torch_cast")["axpb"]
    n = 5000
    assert flow["launches"] == [
        {
            "kernel": "aten::_to_copy",
            "reads": [{"name": "x", "bytes": 2 * n}],
            "writes": [{"name": "temporary 1", "bytes": 4 * n}],
        },
        {
            "kernel": "axpb_kernel",
            "reads": [{"name": "temporary 1", "bytes": 4 * n}],
            "writes": [{"name": "y", "bytes": 4 * n}],
        },
    ]
    # the stage's totals keep to the workspace (the fusion between stages reads them)
    assert [t["name"] for t in flow["tensors"]] == ["x", "y"]


def test_launches_past_the_bound_keep_the_totals_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataflow, "MAX_LAUNCHES", 3)
    ws = {"x": torch.ones(4, 8), "y": torch.zeros(4, 8)}

    def stage() -> None:
        for r in range(4):
            ws["y"][r].copy_(ws["x"][r] * 2)

    _, flow = dataflow.record(stage, ws, ws["y"])
    assert [launch["kernel"] for launch in flow["launches"]] == ["aten::mul", "aten::copy_", "aten::mul"]
    assert flow["launches"][1] == {
        "kernel": "aten::copy_",
        "reads": [{"name": "temporary 1", "bytes": 32}],
        "writes": [{"name": "y", "bytes": 32}],
    }
    assert flow["launches_cut"] == 5 and flow["kernels"] == 8


def test_the_tensors_behind_tensor_descriptors_are_a_launchs_inputs() -> None:
    # mla_decode v5 reads the cache only through two TMA descriptors (TensorDescriptor over kv): the record names kv
    # as read, with its bytes; before, a kernel fed only descriptors seemed to read none of its inputs (issue 52:
    # v9's partial stage looked to move 38 MB, not 190, and fusing it with its combine "saved 88.6%")
    flow = recorded("mla_decode", "v5")["attention"]
    by = {t["name"]: t for t in flow["tensors"]}
    assert by["kv"]["read"] and not by["kv"]["written"]
    assert by["kv"]["bytes"] == 2 * 70 * (64 + 16) * 2  # b=2, t=70, fp16
    assert by["out"]["written"] and by["out"]["output"]


def test_launch_tensors_takes_each_tensor_once() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    kv = torch.zeros(64, 80)
    keys = TensorDescriptor(kv, [64, 80], [80, 1], [16, 64])
    rope = TensorDescriptor(kv, [64, 80], [80, 1], [16, 16])
    assert [t is kv for t in dataflow.launch_tensors([keys, rope, kv, 3, "x"])] == [True]
