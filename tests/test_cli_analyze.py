"""`kbench analyze` without typer or click (kbench.cli.analyze, reached through kbench.cli.entry): its arguments
read as click read them, its help, its errors, a real analysis in its own process, and what that process imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kbench.cli import analyze
from kbench.errors import UsageError
from kbench.modes import registry
from tests.conftest import DATA, Ran

CAPTURE = DATA / "kbench_h100" / "annotation_vector_add_base.ncu-rep"


def test_the_capture_is_the_first_free_token_and_options_go_anywhere() -> None:
    a = analyze.parse(["--out", "D", "-v", "cap.ncu-rep", "--mode=ncu", "--kernel-path", "k1", "--kernel-path=k2"])
    assert (a.capture, a.mode, a.out, a.verbose, a.kernel_path) == (Path("cap.ncu-rep"), "ncu", "D", True, ["k1", "k2"])
    assert (a.plan, a.extra, a.help) == (None, [], False)
    defaults = analyze.parse(["cap.ncu-rep"])
    assert (defaults.out, defaults.mode, defaults.kernel_path, defaults.verbose) == ("out/profiles", None, [], False)


def test_plan_version_and_parameters_follow_in_order() -> None:
    a = analyze.parse(["cap.ncu-rep", "--plan", "mla_decode", "v2", "--b=32", "--out", "D", "--s=16"])
    assert (a.plan, a.extra, a.out) == ("mla_decode", ["v2", "--b=32", "--s=16"], "D")
    assert analyze.parse(["cap.ncu-rep", "--plan=matmul", "--m=1024"]).extra == ["--m=1024"]


@pytest.mark.parametrize(
    ("argv", "extra", "verbose"),
    [
        (["cap", "-vx"], ["-x"], True),  # a short flag combined with letters that are not ours: those stay
        (["cap", "-v=1"], ["-=1"], True),
        (["cap", "--", "--m=1"], ["--m=1"], False),  # `--` ends the options
        (["--", "cap", "--out"], ["--out"], False),
        (["cap", "-", "--Mode", "ncu"], ["-", "--Mode", "ncu"], False),  # no abbreviations, no case folding
    ],
)
def test_tokens_that_are_not_options_are_kept_as_click_kept_them(
    argv: list[str], extra: list[str], verbose: bool
) -> None:
    a = analyze.parse(argv)
    assert (a.capture, a.extra, a.verbose, a.mode) == (Path("cap"), extra, verbose, None)


def test_an_option_takes_the_next_token_whatever_it_looks_like() -> None:
    a = analyze.parse(["cap", "--out", "-v", "--plan", "--m=1"])
    assert (a.out, a.plan, a.verbose, a.extra) == ("-v", "--m=1", False, [])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "Missing argument 'capture'. (see kbench --help)"),
        (["cap", "--mode"], "Option '--mode' requires an argument. (see kbench --help)"),
        (["--kernel-path"], "Option '--kernel-path' requires an argument. (see kbench --help)"),
        (["cap", "--verbose=1"], "Option '--verbose' does not take a value. (see kbench --help)"),
    ],
)
def test_a_malformed_command_line_is_a_usage_error(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as e:
        analyze.parse(argv)
    assert str(e.value) == message and e.value.exit_code == 2


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Ran:
    with pytest.raises(SystemExit) as e:
        analyze.main(argv)
    out, err = capsys.readouterr()
    assert isinstance(e.value.code, int)
    return Ran(e.value.code, out, err)


@pytest.mark.parametrize("extra", [["extra"], ["v2", "--b=32"], ["--m=1024"]])
def test_plan_parameters_without_plan_are_one_error_line_and_exit_2(
    extra: list[str], capsys: pytest.CaptureFixture[str], isolated: Path
) -> None:
    done = _main([str(CAPTURE), *extra], capsys)
    assert done.returncode == 2
    assert done.stderr == (
        f"kbench: error: unexpected argument(s) {' '.join(extra)}; plan parameters need --plan <pkg>\n"
    )
    assert done.stdout == "" and not (isolated / "out").exists()


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_option_and_exits_0(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    done = _main([str(CAPTURE), flag, "--plan", "matmul"], capsys) if flag == "-h" else _main([flag], capsys)
    assert done.returncode == 0 and done.stderr == ""
    text = done.stdout
    assert text.startswith("Usage: kbench analyze [OPTIONS] CAPTURE")
    assert "Build the reports of an existing capture, without a GPU or the profiler" in text
    assert "the exit is 1." in " ".join(text.split())  # the whole description
    for option in analyze.OPTIONS:
        assert ", ".join(option.names) in text, option.names
        assert " ".join(option.help.split()[:4]) in " ".join(text.split()), option.names
    assert "[default: out/profiles]" in text


def test_the_typer_app_forwards_analyze_and_lists_it(
    cli: Callable[..., Ran], capsys: pytest.CaptureFixture[str]
) -> None:
    lean = _main(["--help"], capsys)
    through_app = cli("analyze", "--help")
    assert through_app.returncode == 0 and through_app.stdout == lean.stdout
    top = cli("--help")
    assert "analyze  Build the reports of an existing capture" in top.stdout
    missing = cli("analyze")
    assert (missing.returncode, missing.stderr) == (
        2,
        "kbench: error: Missing argument 'capture'. (see kbench --help)\n",
    )


def test_the_static_table_of_capture_files_is_each_backends_own() -> None:
    assert list(registry.READS) == list(registry.BUILT_IN)
    for name, (suffixes, describes) in registry.READS.items():
        backend = registry.get(name)
        assert (backend.suffixes, backend.describes) == (suffixes, describes), name


def _kbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbench", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=os.environ
    )


@pytest.mark.slow
def test_python_m_kbench_analyze_writes_the_report(isolated: Path) -> None:
    done = _kbench("analyze", str(CAPTURE), "--out", "prof", cwd=isolated)
    assert done.returncode == 0, done.stderr
    reports = list((isolated / "prof").rglob("report.md"))
    assert len(reports) == 1
    assert done.stdout == reports[0].read_text() + "\n"
    assert done.stderr == f"kbench: wrote {reports[0].relative_to(isolated)}\n"
    params = json.loads((reports[0].parent / "params.json").read_text())
    assert params["status"] == "ok" and params["mode"] == "annotation"


def test_python_m_kbench_help_is_still_the_typer_app(isolated: Path) -> None:
    done = _kbench("--help", cwd=isolated)
    assert done.returncode == 0, done.stderr
    assert "analyze" in done.stdout and "profile" in done.stdout


LEAN = """
import json, os, sys
from kbench.cli import entry
try:
    entry.main(["analyze", sys.argv[1], "--out", sys.argv[2]])
except SystemExit as e:
    code = e.code
heavy = ("typer", "click", "torch", "triton", "pandas", "matplotlib")
plugins = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
print(json.dumps({"code": code, "plugins": plugins, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in heavy
    or m in ("kbench.modes.event", "kbench.modes.nsys", "kbench.modes.proton", "kbench.capture.clocks",
        "kbench.report.mode_sections", "kbench.analysis.timeline_stages", "kbench.analysis.intra",
        "kbench.analysis.proton"))}))
"""


def _lean(isolated: Path, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", LEAN, str(CAPTURE), str(isolated / "prof")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=isolated,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


@pytest.mark.slow
def test_the_lean_path_imports_no_command_framework_and_no_other_mode_s_backend_or_analyses(
    isolated: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    # and pydantic does not scan every installed distribution for plugins of its own
    assert _lean(isolated, env) == {"code": 0, "plugins": "__all__", "loaded": []}


@pytest.mark.slow
@pytest.mark.parametrize("value", ["", "logfire"])
def test_a_user_s_choice_of_pydantic_plugins_is_kept(isolated: Path, value: str) -> None:
    assert _lean(isolated, {**os.environ, "PYDANTIC_DISABLE_PLUGINS": value})["plugins"] == value


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["analyze", str(DATA / "kbench_h100" / "torch_fork_join.json"), "--plan", "fork_join"],
        ["check", "vector_add", "v2"],
    ],
)
def test_output_ends_with_kbenchs_own_lines_under_the_installed_triton(tmp_path: Path, argv: list[str]) -> None:
    """With Triton 3.9 (what CI installs) a frozen collector made nanobind print 30+ 'leaked' lines of libtriton's at
    exit, after kbench's answer: a fresh process as the console script runs it, whatever Triton is installed."""

    out = ["--out", str(tmp_path)] if argv[0] == "analyze" else []
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run(
        [sys.executable, "-m", "kbench", *argv, *out], capture_output=True, text=True, timeout=300, env=env
    )
    assert p.returncode == 0, p.stderr
    assert "nanobind" not in p.stdout + p.stderr and "leaked" not in p.stderr
    last = (p.stderr if argv[0] == "analyze" else p.stdout).strip().splitlines()[-1]
    assert last.startswith("kbench: wrote ") if argv[0] == "analyze" else last.startswith("all "), last


RUN = DATA / "validation_h100" / "matmul-v2" / "annotation"  # a kbench run folder: params.json beside the capture


def _run_copy(tmp_path: Path, **changed: object) -> Path:
    """The run folder's capture and tiling/ copied, with its params.json as given (``changed`` replaces fields)."""
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    params = json.loads((RUN / "params.json").read_text())
    (folder / "params.json").write_text(json.dumps({**params, **changed}))
    return folder / "profile.ncu-rep"


def _body(report: str) -> list[str]:
    """report.md without the note saying where the plan came from."""
    return [line for line in report.splitlines() if not line.startswith("- Plan: matmul v2 (")]


@pytest.mark.slow
def test_a_capture_in_a_run_folder_is_analysed_with_the_plan_its_params_json_names(
    cli: Callable[..., Ran], tmp_path: Path, isolated: Path
) -> None:
    capture = _run_copy(tmp_path)
    done = cli("analyze", str(capture), "--out", "a")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Profile: matmul v2\n")
    assert "- Plan: matmul v2 (m=4096, n=4096, k=4096, dtype=bfloat16) taken from params.json beside the capture" in (
        done.stdout
    )
    named = cli("analyze", str(capture), "--out", "b", "--plan", "matmul", "v2", "--m=4096", "--n=4096", "--k=4096")
    assert named.returncode == 0, named.stderr
    assert _body(done.stdout) == _body(named.stdout)  # the same report as with --plan, the note aside


def test_its_mode_is_the_run_s_where_that_mode_reads_the_capture(
    cli: Callable[..., Ran], tmp_path: Path, isolated: Path
) -> None:
    done = cli("analyze", str(_run_copy(tmp_path, mode="ncu")), "--out", "a")
    assert done.returncode == 0, done.stderr
    (run,) = (isolated / "a" / "ncu" / "matmul").glob("*/*")
    assert (run / "report-verbose.md").is_file()


@pytest.mark.parametrize(
    "changed",
    [
        {"kernel": "--kernel-path=/elsewhere"},  # never an option
        {"kernel": "../../matmul"},  # never a path
        {"version": "v2 --m=1"},
        {"params": {"m": "not a number"}},
        {"params": "m=1"},
        {"kernel": ["matmul"]},
        {"mode": "--mode=ncu"},
    ],
)
def test_a_params_json_is_data_checked_as_typed_input(
    cli: Callable[..., Ran], tmp_path: Path, isolated: Path, changed: dict[str, object]
) -> None:
    """What does not name a plan here exactly as a user could type it is not used: the capture is analysed without a
    plan (as from elsewhere), and the report says why."""
    done = cli("analyze", str(_run_copy(tmp_path, **changed)), "--out", "a")
    assert done.returncode == 0, done.stderr
    if "mode" in changed:  # the plan still holds; the mode is the default's
        assert done.stdout.startswith("# Profile: matmul v2\n")
        assert not list((isolated / "a").glob("ncu/*"))
        return
    assert done.stdout.startswith("# Profile: profile offline\n")
    assert "- params.json beside the capture names no plan kbench can load here (" in done.stdout


def test_a_kernel_path_that_is_not_a_folder_is_refused_without_plan(cli: Callable[..., Ran], isolated: Path) -> None:
    done = cli("analyze", str(CAPTURE), "--kernel-path", "nope", "--out", "a")
    assert done.returncode == 2 and "kernel path nope is not a folder" in done.stderr
