"""The MCP server's answers stay bounded and its file access stays inside its roots: every committed capture analysed
and every committed report read through the tools (the SDK's in-memory client) answers under ANSWER_CHARS, paged
where longer; the tool list itself too. With `--root` (or the client's own MCP roots) a path outside, by `..`, an
absolute path or a symbolic link, is refused with one line. `check` runs kbench check for an agent without a GPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types

from kbench.cli.mcp_server import ANSWER_CHARS, build
from tests.conftest import DATA

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
CAPTURES = sorted(
    p
    for p in EXAMPLES.rglob("*")
    if p.suffix in {".ncu-rep", ".sqlite", ".hatchet"} or p.name in {"trace.json", "pytorch_trace.json"}
)


def calls(server: Any, steps: list[tuple[str, dict[str, Any]]], **client: Any) -> list[types.CallToolResult]:
    answers: list[types.CallToolResult] = []

    async def main() -> None:
        async with Client(server, **client) as c:
            for name, args in steps:
                answers.append(await c.call_tool(name, args))

    anyio.run(main)
    return answers


def size(answer: types.CallToolResult) -> int:
    """What the client receives: the structured content and the text blocks."""
    return len(json.dumps(answer.structured_content)) + sum(
        len(c.text) for c in answer.content if isinstance(c, types.TextContent)
    )


def test_the_tool_list_is_bounded() -> None:
    async def main() -> int:
        async with Client(build()) as c:
            return len(json.dumps([t.model_dump(mode="json") for t in (await c.list_tools()).tools]))

    assert anyio.run(main) < ANSWER_CHARS


def plan_of(capture: Path) -> dict[str, Any]:
    """analyze's plan arguments from the params.json beside a committed capture (none when there is none)."""
    try:
        made = json.loads((capture.parent / "params.json").read_text())
    except (OSError, ValueError):
        return {}
    if not made.get("kernel") or not made.get("version") or made.get("kernel") not in {
        "vector_add", "matmul", "fork_join", "mla_decode"
    }:  # fmt: skip
        return {}
    params = {k: str(v) for k, v in (made.get("params") or {}).items()}
    return {"plan": made["kernel"], "plan_version": made["version"], "params": params}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_committed_capture_analysed_through_mcp_answers_within_the_bound(tmp_path: Path) -> None:
    assert len(CAPTURES) >= 8
    steps = [("analyze", {"capture": str(c), "out": str(tmp_path / "out"), **plan_of(c)}) for c in CAPTURES]
    answers = calls(build(), steps)
    ok = 0
    for capture, answer in zip(CAPTURES, answers, strict=True):
        assert size(answer) < ANSWER_CHARS, (capture, size(answer))
        if answer.is_error:  # a capture kbench cannot make a report of says so in one line
            assert len(answer.content[0].text.splitlines()) == 1, capture  # type: ignore[union-attr]
            continue
        ok += 1
        done = answer.structured_content or {}
        assert done["report_md_chars"] >= len(done["report_md"]) and done["report_md"].startswith("# Profile:")
        if done["report"] is None or done["report_md_chars"] > len(done["report_md"]):
            assert done["more"] and "read_report(run" in done["more"]
    assert ok >= len(CAPTURES) // 2


def json_get(whole: Any, pointer: str) -> Any:
    """The value at a JSON pointer (RFC 6901): an object's member by name, a list's item by index."""
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        whole = whole[int(token)] if isinstance(whole, list) else whole[token]
    return whole


def json_covered(whole: Any, pointer: str, parts: set[str]) -> bool:
    """Whether ``parts`` hold the value at ``pointer`` whole: it is a part, or each of its members is covered."""
    if pointer in parts:
        return True
    value = json_get(whole, pointer)
    members = (
        list(value.items()) if isinstance(value, dict) else list(enumerate(value)) if isinstance(value, list) else []
    )
    tokens = (str(k).replace("~", "~0").replace("/", "~1") for k, _ in members)
    return bool(members) and all(json_covered(whole, f"{pointer}/{t}", parts) for t in tokens)


@pytest.mark.slow
def test_committed_reports_read_in_bounded_pages_that_add_up(tmp_path: Path) -> None:
    """report.md in pages of characters that add up to it; report.json in pages of valid JSON, each holding whole
    values of it at their pointers, that together hold every value once."""
    runs = sorted({p.parent for p in EXAMPLES.rglob("report.md")})
    server = build()
    for run in runs[:: max(1, len(runs) // 12)]:
        for fmt in ("md", "json"):
            whole_path = run / ("report.md" if fmt == "md" else "report.json")
            if not whole_path.is_file():
                continue
            text, offset, parts = "", 0, []
            while offset is not None:
                (answer,) = calls(server, [("read_report", {"run": str(run), "format": fmt, "offset": offset,
                                                            "max_chars": 3000})])  # fmt: skip
                assert not answer.is_error and size(answer) < ANSWER_CHARS
                got = answer.structured_content or {}
                if fmt == "json":
                    page = json.loads(got["text"])
                    assert all(
                        json_get(page, p) == json_get(json.loads(whole_path.read_text()), p) for p in got["parts"]
                    )
                    parts += got["parts"]
                text += got["text"]
                offset = got["next_offset"]
            if fmt == "md":
                assert text == whole_path.read_text()
            else:
                assert len(parts) == len(set(parts)) and json_covered(
                    json.loads(whole_path.read_text()), "", set(parts)
                )
    (big,) = calls(server, [("read_report", {"run": str(runs[0]), "max_chars": 10**9})])
    assert size(big) < ANSWER_CHARS


@pytest.fixture
def fenced(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A root holding one committed run folder, a folder outside it holding another, and a symbolic link inside
    the root that leads to the outside one."""
    inner, outer = tmp_path / "root", tmp_path / "elsewhere"
    src = EXAMPLES / "mla_decode-h100-runs" / "v3-s1"
    shutil.copytree(src, inner / "v3-s1")
    shutil.copytree(src, outer / "v3-s1")
    (inner / "link").symlink_to(outer / "v3-s1")
    return tmp_path, inner, outer


@pytest.mark.parametrize("how", ["--root", "client roots"])
def test_paths_outside_the_roots_are_refused_in_one_line(fenced: tuple[Path, Path, Path], how: str) -> None:
    tmp, inner, outer = fenced
    if how == "--root":
        server, client = build(roots=[str(inner)]), {}
    else:

        async def listed(context: Any) -> types.ListRootsResult:
            return types.ListRootsResult(roots=[types.Root(uri=f"file://{inner}")])

        server, client = build(), {"list_roots_callback": listed, "mode": "legacy"}  # roots: pre-2026 protocol
    asked = [
        ("read_report", {"run": str(inner / "v3-s1")}),
        ("read_report", {"run": str(outer / "v3-s1")}),
        ("read_report", {"run": str(inner / ".." / "elsewhere" / "v3-s1")}),
        ("read_report", {"run": str(inner / "link")}),
        ("analyze", {"capture": str(DATA / "kbench_h100" / "annotation_vector_add_base.ncu-rep"), "out": str(inner)}),
        ("runs", {"out": str(tmp)}),
        ("devlog", {"run": str(inner / "v3-s1"), "docs": str(outer / "docs")}),
    ]
    answers = calls(server, asked, **client)
    assert not answers[0].is_error
    for (tool, args), answer in zip(asked[1:], answers[1:], strict=True):
        assert answer.is_error, (tool, args)
        (line,) = answer.content[0].text.splitlines()  # type: ignore[union-attr]
        assert "is outside the roots this MCP client allows" in line and str(inner) in line, line
    assert not (outer / "docs").exists()


def test_without_roots_nothing_is_fenced(fenced: tuple[Path, Path, Path]) -> None:
    _, _, outer = fenced
    (answer,) = calls(build(), [("read_report", {"run": str(outer / "v3-s1")})])
    assert not answer.is_error


@pytest.mark.slow
def test_check_is_a_tool_for_an_agent_without_a_gpu() -> None:
    from tests.conftest import HAS_CUDA

    if HAS_CUDA:
        pytest.skip("the CPU interpreter path")
    (answer,) = calls(build(), [("check", {"kernel": "vector_add", "version": "base", "access": True})])
    got = answer.structured_content or {}
    assert not answer.is_error and got["passed"] and got["exit_code"] == 0
    assert "Triton interpreter" in got["output"] and got["output"].rstrip().endswith("configuration(s) pass")
    assert "| load | 5 | 20012 |" in got["output"]  # --access: vector_add's loads, 5 programs, 5003 floats


def test_check_with_bad_input_is_a_one_line_tool_error() -> None:
    (answer,) = calls(build(), [("check", {"kernel": "nope"})])
    assert answer.is_error
    (line,) = answer.content[0].text.splitlines()  # type: ignore[union-attr]
    assert "unknown kernel package 'nope'" in line
