"""The MCP server's fence, attacked as issue 41's review did: tool arguments never become `kbench check` options, and
every path a tool reads or writes is checked against the roots after joining (a symbolic link planted inside the root
for report.md, params.json, a sibling run, a subfolder of `out`, a package folder or a devlog file leads nowhere
outside). Each attack is refused in one line and leaves nothing outside the root; what the tools return stays
bounded, a malformed run folder is a row of its own, and tool arguments take numbers and answer in one line."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from kbench.cli.mcp_server import ANSWER_CHARS, INSTRUCTIONS, build
from kbench.modes import registry
from tests.conftest import DATA
from tests.test_mcp_bounds import EXAMPLES, calls, size

RUN = EXAMPLES / "mla_decode-h100-runs" / "v3-s1"  # a committed finished run: params.json, result.json, reports
SECRET = "SECRET-0f41"


def refused(answer: Any, *fragments: str) -> str:
    """The answer is a one-line tool error holding every fragment, and no secret."""
    assert answer.is_error, answer.structured_content
    (line,) = answer.content[0].text.splitlines()
    assert all(f in line for f in fragments), line
    assert SECRET not in line
    return str(line)


@pytest.fixture
def evil(tmp_path: Path) -> tuple[Path, Path]:
    """A folder outside any root holding a package that, once imported, leaves a marker file."""
    folder, marker = tmp_path / "evil", tmp_path / "imported"
    (folder / "evilpkg").mkdir(parents=True)
    (folder / "evilpkg" / "__init__.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('x')\n"
    )
    return folder, marker


def test_check_tool_arguments_never_become_options(tmp_path: Path, evil: tuple[Path, Path]) -> None:
    folder, marker = evil
    pictures = tmp_path / "pictures"
    asked: list[tuple[str, dict[str, Any]]] = [
        ("check", {"kernel": "evilpkg", "params": {"kernel-path": str(folder)}}),
        ("check", {"kernel": f"--kernel-path={folder}", "version": "evilpkg"}),
        ("check", {"kernel": "vector_add", "version": "base", "params": {"kernel-path": str(folder)}}),
        (
            "check",
            {
                "kernel": "vector_add",
                "version": "base",
                "access": True,
                "params": {"access-pictures": str(pictures), "n": "64"},
            },
        ),
        ("check", {"kernel": "vector_add", "version": "--kernel-path=/"}),
    ]
    answers = calls(build(), asked)
    refused(answers[0], "unknown kernel package 'evilpkg'")
    refused(answers[1], "unknown kernel package")
    refused(answers[2], "kernel-path")
    refused(answers[3], "access-pictures")
    refused(answers[4], "unknown version")
    assert not marker.exists() and not pictures.exists()


def test_check_puts_every_tool_argument_after_the_end_of_options(tmp_path: Path) -> None:
    from kbench.cli.mcp_fence import check_argv

    argv = check_argv("vector_add", "base", {"n": 4096, "dtype": "float16", "flag": True}, ["/k"], access=True)
    assert argv[argv.index("kbench") + 1 :] == ["check", "--kernel-path=/k", "--access", "--",
                    "vector_add", "base", "--n=4096", "--dtype=float16", "--flag=true"]  # fmt: skip
    assert argv[0] == sys.executable and "-P" in argv  # nothing imported from the server's working folder
    # a value holding a second option stays one token, the value of its own parameter
    assert check_argv("vector_add", None, {"n": "1 --kernel-path=/x"}, [], access=False)[-1] == "--n=1 --kernel-path=/x"


@pytest.fixture
def fenced(tmp_path: Path) -> tuple[Path, Path]:
    """A root and a folder outside it holding a secret in a text file and in a JSON file."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text(f"{SECRET}\n")
    (outside / "secret.json").write_text(json.dumps({"kernel": SECRET, "status": "ok", "error": SECRET}))
    return root, outside


@pytest.mark.parametrize(("fmt", "name"), [("md", "report.md"), ("json", "report.json")])
def test_read_report_checks_the_file_not_only_the_run_folder(fenced: tuple[Path, Path], fmt: str, name: str) -> None:
    root, outside = fenced
    run = root / "run"
    shutil.copytree(RUN, run)
    (run / name).unlink()
    (run / name).symlink_to(outside / ("secret.md" if fmt == "md" else "secret.json"))
    (answer,) = calls(build(roots=[str(root)]), [("read_report", {"run": str(run), "format": fmt})])
    refused(answer, "outside the roots")


def test_runs_never_reads_a_symlinked_params_json(fenced: tuple[Path, Path]) -> None:
    root, outside = fenced
    run = root / "annotation" / "k" / "n=1" / "20260101T000000Z"
    run.mkdir(parents=True)
    (run / "params.json").symlink_to(outside / "secret.json")
    (answer,) = calls(build(roots=[str(root)]), [("runs", {"out": str(root)})])
    assert not answer.is_error and SECRET not in json.dumps(answer.structured_content)
    (row,) = (answer.structured_content or {})["runs"]
    assert row["status"] == "unreadable" and row["path"] == str(run)


def test_files_inside_a_root_are_read_without_following_any_link(tmp_path: Path) -> None:
    """What a link swapped in after the fence's check meets: read_beneath follows none, the leaf or a folder."""
    import os

    from kbench.fsutil import json_object, read_beneath

    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_text("ok")
    (tmp_path / "linked").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "real" / "leaf").symlink_to(tmp_path / "real" / "f")
    os.mkfifo(tmp_path / "real" / "fifo")
    assert read_beneath(tmp_path, tmp_path / "real" / "f") == b"ok"
    for path in ("linked/f", "real/leaf", "real/fifo"):  # a FIFO would block a reader: refused at once
        with pytest.raises(OSError):
            read_beneath(tmp_path, tmp_path / path)
    (tmp_path / "real" / "g.json").write_text("{}")
    (tmp_path / "real" / "link.json").symlink_to(tmp_path / "real" / "g.json")
    assert json_object(tmp_path / "real" / "g.json") == {} and json_object(tmp_path / "real" / "link.json") is None


def _stamped_runs(parent: Path, *stamps: str) -> list[Path]:
    made = []
    for stamp in stamps:
        shutil.copytree(RUN, parent / stamp)
        made.append(parent / stamp)
    return made


def test_compare_previous_never_scans_outside_the_root(fenced: tuple[Path, Path]) -> None:
    _, outside = fenced
    older, newer = _stamped_runs(outside / "p", "20260101T000000Z", "20260102T000000Z")
    (answer,) = calls(build(roots=[str(newer)]), [("compare", {"a": str(newer), "previous": True})])
    refused(answer, "outside the roots")
    assert str(older) not in answer.content[0].text  # type: ignore[union-attr]


def test_compare_previous_refuses_a_sibling_linked_from_outside(fenced: tuple[Path, Path]) -> None:
    root, outside = fenced
    (older,) = _stamped_runs(outside, "20260101T000000Z")
    (newer,) = _stamped_runs(root / "p", "20260102T000000Z")
    (root / "p" / older.name).symlink_to(older)
    (answer,) = calls(build(roots=[str(root)]), [("compare", {"a": str(newer), "previous": True})])
    assert str(outside) not in refused(answer, "no earlier finished run")  # a link is no run of this folder


def test_analyze_never_writes_through_a_symlinked_subfolder_of_out(fenced: tuple[Path, Path]) -> None:
    root, outside = fenced
    capture = root / "annotation_vector_add_base.ncu-rep"
    shutil.copy(DATA / "kbench_h100" / capture.name, capture)
    (root / "out").mkdir()
    (root / "out" / "annotation").symlink_to(outside, target_is_directory=True)
    (answer,) = calls(build(roots=[str(root)]), [("analyze", {"capture": str(capture), "out": str(root / "out")})])
    refused(answer, "outside")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.json", "secret.md"]


def test_a_run_folder_is_always_inside_its_output_folder(fenced: tuple[Path, Path]) -> None:
    """profile and analyze (MCP, CLI and API) make their run folder here: a link below `out` is refused."""
    from kbench.errors import UsageError
    from kbench.report import folder

    root, outside = fenced
    (root / "event").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UsageError, match="leads outside the output folder"):
        folder.new_run_dir(root, "event", "k", "n=1")
    assert not (outside / "k").exists()
    made = folder.new_run_dir(root, "annotation", "k", "n=1")  # a real folder below it, made as before
    assert made.parent == root / "annotation" / "k" / "n=1" and made.is_dir()


def test_clone_version_checks_the_package_folder_it_writes(fenced: tuple[Path, Path]) -> None:
    root, outside = fenced
    shutil.copytree(DATA / "user_kernels_clone" / "scale", outside / "scale")
    (root / "kp").mkdir()
    (root / "kp" / "scale").symlink_to(outside / "scale", target_is_directory=True)
    server = build([str(root / "kp")], roots=[str(root)])
    (answer,) = calls(server, [("clone_version", {"kernel": "scale", "source": "v1", "target": "v2"})])
    refused(answer, "outside the roots")
    assert sorted(p.name for p in (outside / "scale").iterdir()) == ["__init__.py", "v1.py"]


@pytest.mark.parametrize("how", ["a symlinked devlog file", "a kernel name that climbs out"])
def test_devlog_checks_the_file_it_appends_to(fenced: tuple[Path, Path], how: str) -> None:
    root, outside = fenced
    run, docs = root / "run", root / "docs"
    shutil.copytree(RUN, run)
    docs.mkdir()
    before = (outside / "secret.md").read_text()
    if how == "a symlinked devlog file":
        kernel = json.loads((run / "result.json").read_text())["kernel"]
        (docs / f"{kernel}.md").symlink_to(outside / "secret.md")
    else:
        result = json.loads((run / "result.json").read_text())
        (run / "result.json").write_text(json.dumps({**result, "kernel": "../../outside/secret"}))
    (answer,) = calls(build(roots=[str(root)]), [("devlog", {"run": str(run), "docs": str(docs)})])
    refused(answer)  # outside the roots (or, the kernel name's own check first, a name that is no package's)
    assert (outside / "secret.md").read_text() == before


def test_runs_and_compare_answers_stay_bounded(tmp_path: Path) -> None:
    root = tmp_path / "profiles"
    params = json.loads((RUN / "params.json").read_text())
    for i in range(200):
        run = root / "event" / "k" / f"n={i}" / f"202601{1 + i // 28:02d}T0000{i % 28:02d}Z"
        run.mkdir(parents=True)
        (run / "params.json").write_text(json.dumps({**params, "status": "failed", "error": "E" * 2_000}))
    big = root / "event" / "k" / "big" / "20270101T000000Z"
    big.mkdir(parents=True)
    (big / "params.json").write_text(json.dumps({**params, "status": "failed", "error": "E" * 300_000}))
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        shutil.copytree(RUN, run)
        result = json.loads((run / "result.json").read_text())
        fill = "A" if run == a else "B"  # different parameters: the comparison's notes name both
        (run / "result.json").write_text(json.dumps({**result, "params": {**result["params"], "x": fill * 300_000}}))
    listed, first, compared = calls(
        build(),
        [
            ("runs", {"out": str(root), "limit": 200}),
            ("runs", {"out": str(root), "limit": 1}),
            ("compare", {"a": str(a), "b": str(b)}),
        ],
    )
    for answer in (listed, first, compared):
        assert not answer.is_error and size(answer) < ANSWER_CHARS, size(answer)
    got = listed.structured_content or {}
    assert 0 < len(got["runs"]) < 201 and got["more"] and "201" in got["more"]
    (newest,) = (first.structured_content or {})["runs"]
    assert newest["path"] == str(big) and len(newest["error"]) < 2_000 and "characters" in newest["error"]
    assert (compared.structured_content or {})["more"]


def _planted(root: Path) -> tuple[Path, Path]:
    """A good run, and beside it one whose params.json has wrong types and one nested past any parser's depth."""
    good = root / "event" / "k" / "n=1" / "20260101T000000Z"
    shutil.copytree(RUN, good)
    wrong = root / "event" / "k" / "n=2" / "20260102T000000Z"
    wrong.mkdir(parents=True)
    (wrong / "params.json").write_text(json.dumps({"device": "x", "error": 5, "params": [1], "status": {}}))
    deep = good.parent / "20260103T000000Z"  # a later run beside the good one: --previous reads both
    deep.mkdir(parents=True)
    (deep / "params.json").write_text("[" * 100_000 + "]" * 100_000)
    (deep / "result.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    return good, deep


def test_a_malformed_run_folder_is_a_row_of_its_own(tmp_path: Path, cli: Any) -> None:
    from kbench.report.runs import runs

    good, deep = _planted(tmp_path)
    rows = runs(tmp_path)
    assert len(rows) == 3 and [r.status for r in rows].count("unreadable") == 1
    assert {r.path for r in rows} >= {str(good), str(deep)}
    for args in (("runs", "--out", str(tmp_path)), ("runs", "--out", str(tmp_path), "--json")):
        done = cli(*args)
        assert done.returncode == 0, done.stderr
        assert str(good) in done.stdout and str(deep) in done.stdout
    (answer,) = calls(build(), [("runs", {"out": str(tmp_path)})])
    assert not answer.is_error and len((answer.structured_content or {})["runs"]) == 3


def test_deep_json_in_a_run_folder_is_a_clear_error_not_a_kbench_bug(tmp_path: Path, cli: Any) -> None:
    good, deep = _planted(tmp_path)
    for args in (("compare", str(deep), str(good)), ("compare", str(deep), "--previous"), ("devlog", str(deep))):
        done = cli(*args, "--docs", str(tmp_path / "docs")) if args[0] == "devlog" else cli(*args)
        assert done.returncode in (0, 2, 4), (args, done.stderr)
        assert "internal error" not in done.stderr


@pytest.mark.slow
def test_tool_arguments_take_numbers_and_answer_bad_ones_in_one_line(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = [
        ("check", {"kernel": "vector_add", "version": "base", "params": {"n": 64, "dtype": "float32"}}),
        ("check", {"kernel": "vector_add", "params": {"n": [64]}}),
        ("profile", {"kernel": "vector_add", "mode": "bogus", "out": str(tmp_path)}),
    ]
    ok, listed, mode = calls(build(), asked)
    assert not ok.is_error and (ok.structured_content or {})["passed"], ok.content
    assert "'n': 64" in (ok.structured_content or {})["output"]
    for answer in (listed, mode):
        line = refused(answer)
        assert "http" not in line


def test_the_tools_describe_what_a_newcomer_needs() -> None:
    async def main() -> dict[str, Any]:
        async with Client(build()) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            kernels = (await c.call_tool("list_kernels", {})).structured_content or {}
            return {"tools": tools, "kernels": kernels}

    got = anyio.run(main)
    mode = got["tools"]["profile"].input_schema["properties"]["mode"]
    assert set(json.dumps(mode).split('"')) >= set(registry.SUMMARY) and mode.get("default") == "event"
    (vector_add,) = (k for k in got["kernels"]["kernels"] if k["package"] == "vector_add")
    (n,) = (p for p in vector_add["params"] if p["name"] == "n")
    assert n["ge"] == 1 and n["le"] == 2**31
    assert "access" in INSTRUCTIONS and "check" in INSTRUCTIONS and "without a GPU" in INSTRUCTIONS


def _over_stdio(cwd: Path, steps: list[tuple[str, dict[str, Any]]], *options: str) -> list[Any]:
    """`python -m kbench mcp [options]` started in ``cwd`` as a client without MCP roots starts it (Claude Code
    declares none), each step's answer."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    answers: list[Any] = []

    async def main() -> None:
        argv = ["-m", "kbench", "mcp", *options]
        params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(cwd), env=dict(os.environ))
        with (cwd.parent / "server.log").open("a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for name, args in steps:
                    answers.append(await session.call_tool(name, args))

    anyio.run(main)
    return answers


@pytest.mark.slow
def test_kbench_mcp_without_roots_reaches_only_the_folder_it_was_started_in(fenced: tuple[Path, Path]) -> None:
    root, outside = fenced
    shutil.copytree(RUN, root / "run")
    shutil.copytree(RUN, outside / "run")
    (outside / "run" / "report.md").write_text(f"{SECRET}\n")
    steps: list[tuple[str, dict[str, Any]]] = [
        ("read_report", {"run": str(root / "run")}),
        ("read_report", {"run": str(outside / "run")}),
        ("devlog", {"run": str(root / "run"), "docs": str(outside / "docs")}),
        ("runs", {"out": str(outside)}),
    ]
    inside, read, logged, listed = _over_stdio(root, steps)
    assert not inside.is_error and "# Profile" in inside.structured_content["text"]
    for answer in (read, logged, listed):
        refused(answer, "outside the roots")
    assert not (outside / "docs").exists()
    _, read, _, _ = _over_stdio(root, steps, "--root", str(outside.parent))  # --root widens it
    assert not read.is_error and SECRET in read.structured_content["text"]


LONG = "a" * 5_000  # longer than any file system takes as a name


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_report", {"run": LONG}),
        ("read_report", {"run": "run\x00x"}),
        ("runs", {"out": LONG}),
        ("compare", {"a": LONG, "previous": True}),
        ("analyze", {"capture": f"{LONG}.ncu-rep"}),
        ("profile", {"kernel": "vector_add", "mode": "access", "out": "out\x00"}),
        ("clone_version", {"kernel": "vector_add", "source": "base", "target": "v9", "kernel_path": "kp\x00"}),
        ("runs", {"limit": 0}),
        ("runs", {"limit": -1}),
    ],
)
def test_a_path_no_file_system_takes_is_bad_input_never_a_kbench_bug(
    tool: str, args: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (answer,) = calls(build(), [(tool, args)])
    line = refused(answer)
    assert "kbench bug" not in line and len(line) < 500, line


@pytest.mark.parametrize(
    "argv",
    [("runs", "--out", LONG), ("compare", LONG, "--previous"), ("devlog", LONG), ("analyze", f"{LONG}.ncu-rep")],
)
def test_a_path_no_file_system_takes_is_exit_2_on_the_command_line(argv: tuple[str, ...], cli: Any) -> None:
    done = cli(*argv)
    assert done.returncode == 2 and "internal error" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and len(done.stderr) < 500


def test_an_error_naming_what_a_planted_file_holds_stays_bounded(fenced: tuple[Path, Path]) -> None:
    """A tool error quotes the name it refuses: one a planted result.json holds may be 300,000 characters long, and
    the answer must stay under ANSWER_CHARS all the same (one line, cut, saying how long it was)."""
    root, _ = fenced
    run = root / "run"
    shutil.copytree(RUN, run)
    result = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps({**result, "kernel": "../" + "k" * 300_000}))
    answers = calls(
        build(roots=[str(root)]), [("devlog", {"run": str(run)}), ("compare", {"a": str(run), "b": str(run)})]
    )
    for answer in answers:
        line = refused(answer, "result.json names the kernel")
        assert len(line) < 3_000 and size(answer) < ANSWER_CHARS, size(answer)


def test_the_devlog_answer_stays_bounded(fenced: tuple[Path, Path]) -> None:
    """The entry appended quotes result.json and the insights: of any length in the file, bounded in the answer."""
    root, _ = fenced
    run = root / "run"
    shutil.copytree(RUN, run)
    result = json.loads((run / "result.json").read_text())
    # no key: a device the table does not hold is quoted as recorded (one the table holds gets its name)
    (run / "result.json").write_text(json.dumps({**result, "device": "D" * 300_000, "device_key": None}))
    steps = [("devlog", {"run": str(run), "docs": str(root / "docs"), "insights": ["i" * 100_000]})]
    (answer,) = calls(build(roots=[str(root)]), steps)
    assert not answer.is_error and size(answer) < ANSWER_CHARS, size(answer)
    got = answer.structured_content or {}
    written = Path(got["path"]).read_text()
    assert "D" * 300_000 in written and got["entry"] in written and "characters" in (got.get("more") or "")
