"""The MCP tools as a newcomer meets them (issue 50, item 7), through the official client: analyze of a file that is
no capture (a run's report.json) says what analyze takes and which tool reads reports; read_report pages report.json
in valid JSON pieces a client can use; the fence's refusal says how to widen it; clone_version answers with the
profile call of the new version; and SKILL.md's loop (profile -> clone_version -> profile -> edit -> profile ->
compare previous) runs step by step on a CPU in access mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kbench.cli.mcp_server import ANSWER_CHARS, build
from tests.test_mcp_bounds import EXAMPLES, calls, json_covered, json_get, size

RUN = EXAMPLES / "mla_decode-h100-runs" / "v3-s1"  # a committed finished run
BIG = EXAMPLES / "nsys-fork_join-base-fallback"  # the longest committed report.json (56 kB)
KINDS = (".ncu-rep", ".sqlite", ".json", ".hatchet")


def one_line(answer: Any) -> str:
    assert answer.is_error, answer.structured_content
    (line,) = answer.content[0].text.splitlines()
    return str(line)


@pytest.mark.parametrize("name", ["report.json", "result.json", "params.json"])
def test_analyze_of_a_runs_own_file_says_it_is_no_capture_and_names_read_report(name: str, tmp_path: Path) -> None:
    (answer,) = calls(build(), [("analyze", {"capture": str(RUN / name), "out": str(tmp_path / "out")})])
    line = one_line(answer)
    assert "'traceEvents'" not in line and "not a capture" in line and "read_report" in line, line
    assert all(kind in line for kind in KINDS), line
    assert not (tmp_path / "out").exists()


def test_analyze_of_json_that_is_no_trace_says_what_it_lacks(tmp_path: Path) -> None:
    other = tmp_path / "notes.json"
    other.write_text('{"hello": 1}')
    (answer,) = calls(build(), [("analyze", {"capture": str(other), "out": str(tmp_path / "out")})])
    line = one_line(answer)
    assert "'traceEvents'" not in line and "no traceEvents list" in line, line


def test_the_cli_says_the_same_with_exit_2(cli: Any) -> None:
    done = cli("analyze", str(RUN / "report.json"))
    assert done.returncode == 2 and "not a capture" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _json_pages(run: Path, max_chars: int, part: str | None = None) -> list[dict[str, Any]]:
    server = build()
    pages, offset = [], 0
    while offset is not None:
        args = {"run": str(run), "format": "json", "offset": offset, "max_chars": max_chars}
        (answer,) = calls(server, [("read_report", {**args, **({"part": part} if part else {})})])
        assert not answer.is_error, answer.content
        assert size(answer) < ANSWER_CHARS
        got = answer.structured_content or {}
        pages.append(got)
        offset = got["next_offset"]
    return pages


def test_read_report_pages_report_json_in_valid_json_whose_parts_rebuild_it() -> None:
    whole = json.loads((BIG / "report.json").read_text())
    pages = _json_pages(BIG, 3000)
    assert len(pages) > 5
    seen: list[str] = []
    for page in pages:
        text = json.loads(page["text"])  # every page is valid JSON on its own
        assert isinstance(text, dict) and page["parts"]
        for pointer in page["parts"]:  # each part: a whole value of report.json, at its pointer in the page too
            assert json_get(text, pointer) == json_get(whole, pointer), pointer
        seen += page["parts"]
    assert len(seen) == len(set(seen)) and json_covered(whole, "", set(seen))
    assert "/top3" in seen and "/schema_version" in pages[0]["parts"]
    assert "part=" in (pages[0]["more"] or "")  # how to ask for one section whole


def test_read_report_reads_one_part_of_report_json_whole() -> None:
    whole = json.loads((RUN / "report.json").read_text())
    (page,) = _json_pages(RUN, 40_000, part="/top3")
    assert json.loads(page["text"]) == {"top3": whole["top3"]} and page["parts"] == ["/top3"]
    assert _json_pages(RUN, 40_000, part="top3") == [page]  # a top-level entry by its name
    (first,) = _json_pages(RUN, 40_000, part="/stages/0")
    assert json.loads(first["text"]) == {"stages": {"0": whole["stages"][0]}}
    (answer,) = calls(build(), [("read_report", {"run": str(RUN), "format": "json", "part": "/nothing"})])
    assert "/nothing" in one_line(answer)


@pytest.mark.parametrize("text", ["not json {", "[" * 100_000 + "]" * 100_000, json.dumps({"a": "x" * 60_000})])
def test_a_report_json_no_page_holds_by_parts_is_paged_by_characters_saying_so(text: str, tmp_path: Path) -> None:
    """Not JSON, nested deeper than Python parses, one value longer than a page: pages of characters that add up."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    (run / "report.json").write_text(text)
    server, got, offset = build(), "", 0
    while offset is not None:
        (answer,) = calls(server, [("read_report", {"run": str(run), "format": "json", "offset": offset})])
        assert not answer.is_error and size(answer) < ANSWER_CHARS, answer.content
        page = answer.structured_content or {}
        assert page["parts"] is None and (page["next_offset"] is None or "by characters" in page["more"])
        got, offset = got + page["text"], page["next_offset"]
    assert got == text


@pytest.mark.parametrize("shape", ["many small items", "quotes to escape"])
def test_json_pages_of_many_small_parts_stay_within_the_bound(shape: str, tmp_path: Path) -> None:
    """Parts of a few characters each (a long list split into its items), or values whose every character is escaped
    again in the answer: each page's text, pointers and `more` stay under the bound as the client receives them."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    if shape == "many small items":
        whole: Any = {"a": list(range(6_000)), "b": {f"k{i}": [i] for i in range(3_000)}}  # under MAX_PARTS
    else:
        whole = {"q": ['"\\"' * 40 for _ in range(3_000)]}
    (run / "report.json").write_text(json.dumps(whole))
    pages = _json_pages(run, 40_000)  # each answer checked against ANSWER_CHARS there
    seen = [p for page in pages for p in page["parts"]]
    assert len(pages) > 2 and json_covered(whole, "", set(seen)) and len(seen) == len(set(seen))


def test_read_report_pages_report_md_by_characters_as_before() -> None:
    server = build()
    text, offset = "", 0
    while offset is not None:
        (answer,) = calls(server, [("read_report", {"run": str(RUN), "offset": offset, "max_chars": 3000})])
        got = answer.structured_content or {}
        text, offset = text + got["text"], got["next_offset"]
    assert text == (RUN / "report.md").read_text()


@pytest.mark.parametrize("how", ["--root", "client roots", "started in"])
def test_the_fences_refusal_says_how_to_widen_it(how: str, tmp_path: Path) -> None:
    from mcp import types

    inner = tmp_path / "root"
    shutil.copytree(RUN, inner / "run")
    shutil.copytree(RUN, tmp_path / "elsewhere")
    client: dict[str, Any] = {}
    if how == "--root":
        server = build(roots=[str(inner)])
    elif how == "client roots":

        async def listed(context: Any) -> types.ListRootsResult:
            return types.ListRootsResult(roots=[types.Root(uri=f"file://{inner}")])

        server, client = build(), {"list_roots_callback": listed, "mode": "legacy"}
    else:
        server = build(fallback=[str(inner)])
    (answer,) = calls(server, [("read_report", {"run": str(tmp_path / "elsewhere")})], **client)
    line = one_line(answer)
    assert "is outside the roots this MCP client allows" in line and "--root" in line, line
    if how != "--root":
        assert "MCP roots" in line, line


def _loop_call(server: Any, steps: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    answers = calls(server, steps)
    for (tool, _), answer in zip(steps, answers, strict=True):
        assert not answer.is_error, (tool, answer.content)
    return [a.structured_content or {} for a in answers]


@pytest.mark.timeout(600)
def test_skills_loop_through_mcp_on_a_cpu(tmp_path: Path, isolated: Path) -> None:
    """SKILL.md's loop, step by step, as an agent without a GPU runs it: profile v2 in access mode, clone it (a
    shipped package: copied as my_vector_add), profile the clone with the call clone_version answers, compare it
    with previous=true (v2's run: the package it was copied from), edit it, profile it again and compare with the
    previous run (its own first one)."""
    out, kernels = str(tmp_path / "out"), tmp_path / "kernels"
    params = {"n": 4096}
    server = build()
    (v2,) = _loop_call(server, [("profile", {"kernel": "vector_add", "version": "v2", "params": params,
                                             "mode": "access", "out": out})])  # fmt: skip
    (cloned,) = _loop_call(server, [("clone_version", {"kernel": "vector_add", "source": "v2", "target": "v3",
                                                       "kernel_path": str(kernels)})])  # fmt: skip
    assert cloned["profile"] == {"kernel": "my_vector_add", "version": "v3"}
    assert cloned["edit"][0] in cloned["next"] and "profile(" in cloned["next"]
    (first,) = _loop_call(server, [("profile", {**cloned["profile"], "params": params, "mode": "access",
                                                "out": out})])  # fmt: skip
    (compared,) = _loop_call(server, [("compare", {"a": first["run"], "previous": True})])
    assert compared["a"] == v2["run"] and compared["b"] == first["run"], compared
    assert any("copy of vector_add" in n for n in compared["notes"]), compared["notes"]
    edited = Path(cloned["edit"][0])
    edited.write_text(edited.read_text() + "\n# an edit\n")
    (second,) = _loop_call(server, [("profile", {**cloned["profile"], "params": params, "mode": "access",
                                                 "out": out})])  # fmt: skip
    (again,) = _loop_call(server, [("compare", {"a": second["run"], "previous": True})])
    assert again["a"] == first["run"] and again["source_changed"] is True
    (time_row,) = [r for r in again["rows"] if r["metric"].startswith("Interpreter time")]
    assert "%" not in time_row["change"] and "not compared" in time_row["change"]


def test_compare_previous_of_a_first_run_says_why_there_is_none(tmp_path: Path) -> None:
    run = tmp_path / "access" / "nobody" / "n1" / "20260101T000000Z"
    shutil.copytree(RUN, run)
    (answer,) = calls(build(), [("compare", {"a": str(run), "previous": True})])
    line = one_line(answer)
    assert "no earlier finished run" in line and "compare(a=" in line, line


def test_kbench_compare_previous_of_a_copys_first_run_takes_the_shipped_packages(tmp_path: Path, cli: Any) -> None:
    """SKILL.md step 6 on the command line: the first run of my_mla_decode (kbench clone's copy) compares with the
    latest mla_decode run of the same mode and parameters; a package that is no copy's finds none."""
    older = tmp_path / "event" / "mla_decode" / "s1" / "20260101T000000Z"
    newer = tmp_path / "event" / "my_mla_decode" / "s1" / "20260102T000000Z"
    for run, kernel in ((older, "mla_decode"), (newer, "my_mla_decode")):
        shutil.copytree(RUN, run)
        made = json.loads((run / "params.json").read_text())
        (run / "params.json").write_text(json.dumps({**made, "kernel": kernel}))
    done = cli("compare", str(newer), "--previous", "--format", "json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["a"] == str(older) and got["b"] == str(newer)
    shutil.move(str(older.parent.parent), str(tmp_path / "event" / "other"))
    done = cli("compare", str(newer), "--previous")
    assert done.returncode == 2 and "nor of mla_decode, which my_mla_decode is a copy of" in done.stderr
    assert "kbench compare OTHER_RUN RUN" in done.stderr


def test_a_deep_and_wide_report_json_is_paged_by_characters_in_bounded_work() -> None:
    """A report.json nested 400 deep around 200,000 items took 84 s of CPU per read_report call (every part's size
    summed again over its path): past MAX_PARTS parts or MAX_DEPTH levels it is paged by characters, saying so.
    Counted, not timed: the parts listed stay within the cap."""
    from kbench.cli import mcp_json_pages

    whole = '{"a":' * 400 + "[" + ",".join(["0"] * 200_000) + "]" + "}" * 400
    page = mcp_json_pages.json_page("r", whole, 0, 40_000, None)
    assert page.parts is None and "paged by characters" in (page.more or "")
    wide = json.dumps({"a": list(range(mcp_json_pages.MAX_PARTS + 1))})
    assert "paged by characters" in (mcp_json_pages.json_page("r", wide, 0, 40_000, None).more or "")
    deep = (
        '{"a":' * (mcp_json_pages.MAX_DEPTH + 1)
        + "["
        + ",".join(["0"] * 20_000)
        + "]"
        + "}" * (mcp_json_pages.MAX_DEPTH + 1)
    )
    assert mcp_json_pages.json_page("r", deep, 0, 40_000, None).parts is None
