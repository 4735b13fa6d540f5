"""report.json: the schema file is the model's; every figure report.md shows is in report.json with the same value;
every number says where it came from. On analyses of committed H100 captures (annotation with a plan, ncu without
one, an nsys timeline with a plan)."""

from __future__ import annotations

import ast
import json
import lzma
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbench.report.render import num, sci
from kbench.report.report_json import ReportJson, schema
from tests.conftest import DATA, Ran

ROOT = Path(__file__).resolve().parent.parent

CAPTURES = {
    "annotation-plan": ("kbench_h100/annotation_matmul_base.ncu-rep", ["--plan", "matmul"]),
    "ncu-no-plan": ("ncu_h100/full_mm.ncu-rep", ["--mode", "ncu"]),
    "nsys-plan": ("kbench_h100/nsys_fork_join.sqlite", ["--plan", "fork_join"]),
    # a run folder kbench wrote (its params.json and tiling/ beside the capture: the plan and launch records)
    "annotation-gluon": ("validation_h100_gluon/mla_decode-v7_fa3/annotation/profile.ncu-rep.xz", []),
}


def _capture(name: str) -> Path:
    """A committed capture where `kbench analyze` reads it: a compressed run folder's copied and unpacked here."""
    path = DATA / name
    if path.suffix != ".xz":
        return path
    run = Path("run")
    shutil.copytree(path.parent, run)
    (run / path.stem).write_bytes(lzma.decompress(path.read_bytes()))
    return run / path.stem


def test_the_exported_schema_is_the_models() -> None:
    written = json.loads((ROOT / "docs" / "schema" / "report.schema.json").read_text())
    assert written == json.loads(json.dumps(schema())), (
        "docs/schema/report.schema.json is stale: python -m kbench.report.report_json > docs/schema/report.schema.json"
    )
    assert written["$id"].endswith("report-1.json") and written["properties"]["schema_version"]["const"] == "1"


def _table(md: str, header: str) -> list[list[str]]:
    block = md.split(header, 1)[1].split("\n\n", 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[1:]]


@pytest.fixture(params=list(CAPTURES))
def analysed(request: pytest.FixtureRequest, cli: Callable[..., Ran], isolated: Path) -> tuple[str, dict[str, Any]]:
    capture, args = CAPTURES[request.param]
    done = cli("analyze", str(_capture(capture)), "--out", "out", *args)
    assert done.returncode == 0, done.stderr
    run = next(p.parent for p in Path("out").rglob("report.json"))
    data = json.loads((run / "report.json").read_text())
    ReportJson.model_validate(data)  # what was written is the schema's
    return (run / "report.md").read_text(), data


@pytest.mark.slow
def test_every_figure_of_report_md_is_in_report_json(analysed: tuple[str, dict[str, Any]]) -> None:
    md, data = analysed
    stages = {s["name"]: s for s in data["stages"]}
    v = lambda s, k: s[k]["value"]  # noqa: E731
    shown = _table(md, "| Stage | Duration (us) |")
    assert [row[0] for row in shown] == list(stages)
    for name, dur, tc, dram, occ, bottleneck, issue in shown:
        s = stages[name]
        assert [dur, tc, dram, occ] == [
            num(v(s, "duration_us")), num(v(s, "tc_pct"), 1), num(v(s, "dram_pct"), 1), num(v(s, "occ_pct"), 1)
        ]  # fmt: skip
        assert bottleneck == (s["bottleneck"] or "n/a") and issue == s["key_issue"].replace("|", "/")
    assert f"Bottleneck: {data['plan']['bottleneck']}-bound" in md
    assert f"Root cause: {data['plan']['root_cause']}" in md
    if "## Roofline" in md:
        for row in _table(md, "| Stage | Precision | FLOPs |"):
            s = stages[row[0]]
            assert row[1:] == [
                s["precision"], sci(v(s, "flops")), sci(v(s, "dram_bytes")), num(v(s, "intensity")),
                num(v(s, "ridge"), 1), num(v(s, "tflops")), num(v(s, "gbps"), 1), num(v(s, "bound_us")),
                num(v(s, "efficiency_pct"), 1), s["limiting_roof"] or "n/a",
            ]  # fmt: skip
        assert f"Ceilings: {data['roofline']['ceilings_source']}." in md
    for o in data["top3"]:
        line = f"{o['rank']}. {o['name']} — est. {o['gain_pct']['value']:.1f}% gain — trigger: "
        assert f"{line}{o['trigger_metric']}={o['trigger_value']}" in md
        if o["change"]:
            assert f"   change: {o['change']}" in md
    env = data["environment"]
    assert f"- Device: {env['device']} " in md and all(f"- {n}" in md for n in env["notes"])
    assert f"- Clocks: {env['clocks'] or 'n/a (not recorded in the capture)'}" in md
    assert all(f"- `{path}`: {what}" in md for path, what in data["files"])
    assert data["files"][0][0] == "report.json"


@pytest.mark.slow
def test_every_number_says_where_it_came_from(analysed: tuple[str, dict[str, Any]]) -> None:
    _, data = analysed
    values = [s[k] for s in data["stages"] for k in s if isinstance(s[k], dict) and "source" in s[k]]
    values += [data["plan"]["duration_us"], *(o["gain_pct"] for o in data["top3"])]
    assert values
    for x in values:
        assert (x["value"] is None) == (x["source"] == "n/a"), x
        assert x["source"] == "n/a" or x["by"], x
        if x["source"] == "derived" and x["inputs"]:
            assert all(isinstance(i, float | int) for i in x["inputs"].values())
    for s in data["stages"]:
        assert s["duration_us"]["source"] == "measured"
        if data["mode"] in ("annotation", "ncu"):
            assert s["duration_us"]["by"].startswith("ncu: gpu__time_duration.sum")
        if s["tflops"]["source"] == "derived":
            i = s["tflops"]["inputs"]
            assert s["tflops"]["value"] == pytest.approx(i["flops"] / i["duration_us"] / 1e6)
    # with a plan the model is the plan's (analytic); without one, what ncu counted (measured)
    # (this ncu capture counted DRAM bytes and tensor-core ops but not the FP instructions: the tensor FLOPs stand in)
    sources = {s[k]["source"] for s in data["stages"] for k in ("flops", "dram_bytes")}
    assert sources == ({"measured"} if data["kernel"] == "full_mm" else {"analytic"})


def _evaluate(formula: str, inputs: dict[str, float]) -> float:
    """A gain's formula (arithmetic, min and max over named inputs) evaluated with its inputs, nothing else."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name):
            return inputs[node.id]  # a name the formula uses and inputs lacks fails here
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: float.__add__, ast.Sub: float.__sub__, ast.Mult: float.__mul__, ast.Div: float.__truediv__}
            return ops[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            return (min if node.func.id == "min" else max)(ev(a) for a in node.args)
        raise AssertionError(f"not a gain formula: {ast.dump(node)}")

    return ev(ast.parse(formula, mode="eval"))


def test_every_gain_gives_its_formula_and_the_inputs_it_was_computed_from(
    analysed: tuple[str, dict[str, Any]],
) -> None:
    _, data = analysed
    assert data["top3"]
    for o in data["top3"]:
        gain = o["gain_pct"]
        formula = gain["by"].split(": ", 1)[0]  # the formula, then what it models
        assert gain["source"] == "derived" and formula != gain["by"], gain
        assert _evaluate(formula, gain["inputs"]) == pytest.approx(gain["value"], abs=1e-9), o["name"]


def test_every_item_says_where_it_is_and_its_triggers_unit(analysed: tuple[str, dict[str, Any]]) -> None:
    _, data = analysed
    stages = [s["name"] for s in data["stages"]]
    for o in data["top3"]:
        where, trigger = o["location"], o["trigger"]
        assert where["stage"] is None or where["stage"] in stages
        assert trigger["metric"] == o["trigger_metric"] and trigger["text"] == o["trigger_value"]
        if trigger["value"] is not None:  # a number: its unit (a figure like tf32 or mma.sync has none)
            assert trigger["unit"] and float(trigger["text"].rstrip("%x")) == trigger["value"]
        if where["line"] is not None:  # the line it names, as report.md quotes it
            assert f"{where['file']}:{where['line']}" in o["name"] + (o["change"] or "")
            assert where["code"] is None or f"`{where['code']}`" in o["name"] + (o["change"] or "")


def test_a_gluon_items_place_is_its_wait_line_and_its_trigger_a_percentage(
    cli: Callable[..., Ran], isolated: Path
) -> None:
    capture, args = CAPTURES["annotation-gluon"]
    assert cli("analyze", str(_capture(capture)), "--out", "out", *args).returncode == 0
    data = json.loads(next(Path("out").rglob("report.json")).read_text())
    first = data["top3"][0]
    assert first["trigger_metric"] == "attention.mbarrier_wait_share"
    assert first["location"] == {
        "stage": "attention",
        "kernel": "mla_v7_kernel",
        "file": "v7.py",
        "line": 145,
        "code": "mbarrier.wait(bars.index(1 + nxt), ((j + 1) // 2) & 1)",
    }
    assert first["trigger"] == {"metric": "attention.mbarrier_wait_share", "text": "21.7%", "value": 21.7, "unit": "%"}
    assert set(first["gain_pct"]["inputs"]) == {"saved_us", "kernel_share", "gap_us", "total_us"}
    source = (ROOT / "src" / "kbench" / "kernel" / "mla_decode" / "v7.py").read_text().splitlines()
    assert source[first["location"]["line"] - 1].strip() == first["location"]["code"]
