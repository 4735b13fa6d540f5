"""The agent's loop on CPU, twice: through the CLI and through the MCP server (the SDK's in-memory client). Analyze
two committed H100 captures of matmul (base, then v2's), compare them, devlog the second, clone a version; every
answer validates against its JSON Schema (report.json's exported schema, each MCP tool's output schema)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client

from kbench.cli.mcp_server import build
from tests.conftest import DATA, Ran

ROOT = Path(__file__).resolve().parent.parent
REPORT_SCHEMA = json.loads((ROOT / "docs" / "schema" / "report.schema.json").read_text())
BASE = DATA / "kbench_h100" / "annotation_matmul_base.ncu-rep"
V2 = DATA / "validation_h100" / "matmul-v2" / "annotation" / "profile.ncu-rep"  # same shape, the next version


@pytest.mark.slow
def test_the_loop_through_the_cli(cli: Callable[..., Ran], tmp_path: Path, isolated: Path) -> None:
    out, docs = tmp_path / "profiles", tmp_path / "kernels"
    for capture, version in ((BASE, "base"), (V2, "v2")):
        done = cli("analyze", str(capture), "--plan", "matmul", version, "--out", str(out))
        assert done.returncode == 0, done.stderr
    listed = json.loads(cli("runs", "--out", str(out), "--json").stdout)
    assert len(listed) == 2 and all(r["status"] == "ok" for r in listed)
    for r in listed:
        jsonschema.validate(json.loads((Path(r["path"]) / "report.json").read_text()), REPORT_SCHEMA)
    newer, older = listed[0]["path"], listed[1]["path"]
    assert (listed[0]["version"], listed[1]["version"]) == ("v2", "base")
    compared = json.loads(cli("compare", older, newer, "--format", "json").stdout)
    assert compared["rows"][0]["metric"] == "Duration (us)" and compared["notes"][-1].startswith("the plan's")
    assert cli("devlog", older, "--docs", str(docs)).returncode == 0
    logged = cli("devlog", newer, "--docs", str(docs), "--insight", "grouped program order")
    log = (docs / "matmul.md").read_text()
    assert logged.returncode == 0 and "- grouped program order" in log and f"vs Previous: vs base (`{older}`)" in log
    kernels = tmp_path / "kp"
    shutil.copytree(DATA / "user_kernels_clone", kernels)
    assert cli("clone", "scale", "v1", "v2", "--kernel-path", str(kernels)).returncode == 0


def _call(server: Any, steps: list[tuple[str, dict[str, Any]]]) -> list[tuple[Any, dict[str, Any] | None]]:
    """Run tool calls in order on an in-memory client; each answer (is_error, structured content) checked against
    the tool's output schema."""
    answers: list[tuple[Any, dict[str, Any] | None]] = []

    async def main() -> None:
        async with Client(server) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            for name, args in steps:
                r = await c.call_tool(name, args)
                if not r.is_error:
                    schema = tools[name].output_schema
                    assert r.structured_content is not None and schema is not None
                    jsonschema.validate(r.structured_content, schema)
                answers.append((r, r.structured_content))

    anyio.run(main)
    return answers


@pytest.mark.slow
def test_the_loop_through_mcp(tmp_path: Path, isolated: Path) -> None:
    out, docs = str(tmp_path / "profiles"), str(tmp_path / "kernels")
    kernels = tmp_path / "kp"
    shutil.copytree(DATA / "user_kernels_clone", kernels)
    server = build([str(kernels)])
    first = _call(
        server,
        [
            ("list_kernels", {}),
            ("analyze", {"capture": str(BASE), "plan": "matmul", "out": out}),
            ("analyze", {"capture": str(V2), "plan": "matmul", "plan_version": "v2", "out": out}),
            ("runs", {"out": out}),
        ],
    )
    kernels_answer = first[0][1]
    assert kernels_answer is not None
    names = {k["package"]: k for k in kernels_answer["kernels"]}
    assert {"matmul", "vector_add", "scale"} <= set(names)
    assert "v2" in {v["version"] for v in names["matmul"]["versions"]}
    assert any(p["name"] == "m" for p in names["matmul"]["params"])
    for _, analysed in first[1:3]:
        assert analysed is not None and analysed["report_md"].startswith("# Profile: matmul")
        jsonschema.validate(analysed["report"], REPORT_SCHEMA)
    listed = first[3][1]
    assert listed is not None and len(listed["runs"]) == 2
    newer = listed["runs"][0]["path"]
    second = _call(
        server,
        [
            ("compare", {"a": newer, "previous": True}),
            ("read_report", {"run": newer, "format": "json"}),
            ("devlog", {"run": newer, "insights": ["from the MCP loop"], "docs": docs}),
            ("clone_version", {"kernel": "scale", "source": "v1", "target": "v2"}),
        ],
    )
    compared, report, logged, cloned = (a for _, a in second)
    assert compared is not None and compared["b"] == newer and compared["rows"][0]["metric"] == "Duration (us)"
    assert report is not None and json.loads(report["text"])["version"] == "v2"
    jsonschema.validate(json.loads(report["text"]), REPORT_SCHEMA)
    assert logged is not None and "- from the MCP loop" in Path(logged["path"]).read_text()
    assert cloned is not None and cloned["renamed"]["ScaleV1"] == "ScaleV2"
    shipped = _call(server, [("clone_version", {"kernel": "matmul", "source": "v2", "target": "v3",
                                                 "kernel_path": str(kernels)})])  # fmt: skip
    answer = shipped[0][1]
    assert answer is not None and answer["package"] == "my_matmul" and answer["kernel_path"] == str(kernels)
    assert answer["edit"] == [str(kernels / "my_matmul" / "v3.py"), str(kernels / "my_matmul" / "_triton_v3.py")]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tool", "args", "fragment"),
    [
        ("analyze", {"capture": "/nonexistent.ncu-rep"}, "no such capture file"),
        ("analyze", {"capture": str(BASE), "plan": "nosuch"}, "unknown kernel package 'nosuch'"),
        ("profile", {"kernel": "vector_add"}, "CUDA"),  # no GPU here: one line saying so
        ("read_report", {"run": "/nonexistent"}, "has no report.md"),
        ("compare", {"a": "/nonexistent"}, "give two run folders, or one and previous=true"),
        ("clone_version", {"kernel": "scale", "source": "v1", "target": "v1"}, "never overwrites"),
    ],
)
def test_errors_come_back_as_one_line_tool_errors(
    tool: str, args: dict[str, Any], fragment: str, tmp_path: Path, isolated: Path
) -> None:
    kernels = tmp_path / "kp"
    shutil.copytree(DATA / "user_kernels_clone", kernels)
    [(r, _)] = _call(build([str(kernels)]), [(tool, {**args, **({"out": str(tmp_path)} if "out" in args else {})})])
    text = r.content[0].text
    assert r.is_error and fragment in text, text
    assert "Traceback" not in text and len(text.splitlines()) == 1


@pytest.mark.slow
def test_kbench_mcp_serves_over_stdio(tmp_path: Path) -> None:
    """The command an MCP client registers: `python -m kbench mcp`, spoken to over its stdin/stdout."""
    import sys

    from mcp import ClientSession, StdioServerParameters, stdio_client

    names: list[str] = []

    async def main() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "kbench", "mcp"], cwd=str(tmp_path))
        with (tmp_path / "server.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                names.extend(sorted(t.name for t in (await session.list_tools()).tools))
                r = await session.call_tool("runs", {"out": str(tmp_path / "none")})
                assert not r.is_error and r.structured_content == {"runs": [], "more": None}

    anyio.run(main)
    assert names == [
        "analyze", "check", "clone_version", "compare", "devlog", "list_kernels", "profile", "read_report", "runs"
    ]  # fmt: skip


def test_profile_through_mcp_reports_progress(tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile tool on a registered CPU backend (tests/test_pipeline.py's Replay): the pipeline's progress
    lines arrive as MCP progress notifications, and the answer is the run's report."""
    from kbench.modes import registry
    from tests.pipeline_fakes import offline_gpu
    from tests.test_pipeline import Replay

    offline_gpu(monkeypatch)
    registry.register(Replay())
    got: list[tuple[float, float | None, str | None]] = []
    answer: dict[str, Any] = {}

    async def main() -> None:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            got.append((progress, total, message))

        async with Client(build()) as c:
            r = await c.call_tool(
                "profile",
                {"kernel": "matmul", "mode": "replay", "out": str(tmp_path / "p"), "params": {"m": "1024"}},
                progress_callback=on_progress,
            )
            assert not r.is_error, r.content
            answer.update(r.structured_content or {})

    try:
        anyio.run(main)
    finally:
        registry.unregister("replay")
    assert got and [p for p, _, _ in got] == list(range(1, len(got) + 1))
    assert all(isinstance(m, str) and m for _, _, m in got)
    assert answer["report"]["mode"] == "replay" and answer["report"]["params"]["m"] == 1024
    assert answer["report_md"].startswith("# Profile: matmul base")


def test_mcp_analyze_reads_the_plan_beside_a_capture_from_the_servers_kernel_path(tmp_path: Path) -> None:
    """A capture in a run folder of the user's own package (its params.json names it) is analysed with that plan when
    the server's --kernel-path holds the package, as `kbench analyze --kernel-path` does."""
    run = ROOT / "docs" / "examples" / "access-h100" / "annotation-transpose-naive"
    assert json.loads((run / "params.json").read_text())["kernel"] == "transpose"  # not a shipped package
    steps = [("analyze", {"capture": str(run / "profile.ncu-rep"), "out": str(tmp_path / "out")})]
    [(r, answer)] = _call(build([str(DATA / "validation")]), steps)
    assert not r.is_error and answer is not None
    assert answer["report_md"].startswith("# Profile: transpose naive"), answer["report_md"][:200]
