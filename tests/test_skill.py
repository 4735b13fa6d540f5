"""The agents' skill document cannot drift: every command, subcommand and flag docs/agents/SKILL.md and its mode
references show exists in kbench's --help (a plan parameter in the plan named), and every MCP tool it names is
served."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp import Client

from kbench.cli.mcp_server import build
from kbench.plan.discovery import load_version
from tests.conftest import Ran

DOCS = Path(__file__).resolve().parent.parent / "docs" / "agents"
PAGES = [DOCS / "SKILL.md", *sorted((DOCS / "references").glob("mode-*.md"))]
COMMAND = re.compile(r"(python -m kbench\.kernel|kbench)((?: [^`\n]*)?)")
FLAG = re.compile(r"(?<![\w<])--([a-z][a-z0-9_-]*)")


def shown_commands() -> list[tuple[Path, str, str]]:
    """(page, command, rest of the line) for every command in inline code or code blocks."""
    out = []
    for page in PAGES:
        text = page.read_text()
        spans = re.findall(r"`([^`\n]+)`", text) + [
            line for block in re.findall(r"```\n(.*?)```", text, re.S) for line in block.splitlines()
        ]
        for span in spans:
            for m in COMMAND.finditer(span):
                out.append((page, m.group(1), m.group(2).strip()))
    return out


def test_the_pages_exist_and_show_the_loop() -> None:
    assert [p.name for p in PAGES] == [
        "SKILL.md", "mode-access.md", "mode-annotation.md", "mode-event.md", "mode-intra.md", "mode-ncu.md",
        "mode-nsys.md", "mode-proton.md"
    ]  # fmt: skip
    shown = {(cmd, rest.split(" ")[0]) for _, cmd, rest in shown_commands()}
    for sub in ("list", "check", "clone", "compare", "devlog", "runs", "analyze", "mcp", "sweep"):
        assert ("kbench", sub) in shown, sub
    assert any(cmd == "python -m kbench.kernel" for cmd, _ in shown)


def test_every_command_and_flag_shown_exists(cli: Callable[..., Ran]) -> None:
    helps: dict[str, str] = {}
    checked = 0
    for page, cmd, rest in shown_commands():
        words = rest.split()
        if cmd == "kbench":
            if not words or words[0].startswith("-"):
                continue
            sub = words[0]
            if sub not in helps:
                got = cli(sub, "--help")
                assert got.returncode == 0, f"{page.name}: `kbench {sub}` is not a command"
                helps[sub] = got.stdout
            text = helps[sub]
            # a kernel package named after the subcommand: its plan parameters are flags too (check, sweep)
            package = next((w for w in words[1:] if re.fullmatch(r"[a-z_][a-z0-9_]*", w)), None)
            params = _params(package)
        else:
            if "kernel" not in helps:
                helps["kernel"] = cli("--help", module="kbench.kernel").stdout
            text = helps["kernel"]
            package = next((w for w in words if re.fullmatch(r"[a-z_][a-z0-9_]*", w)), None)
            params = _params(package)
        for flag in FLAG.findall(rest):
            name = flag.rstrip("=")
            shown_as = {f"--{name}", f"--{name.replace('_', '-')}", f"--{name.replace('-', '_')}"}
            assert any(s in text for s in shown_as) or name in params, f"{page.name}: {cmd} {rest}: --{name}"
            checked += 1
    assert checked >= 12


def _params(package: str | None) -> set[str]:
    from kbench.errors import UsageError

    try:
        return {p.name for p in load_version(package).params()} if package else set()
    except UsageError:  # not a package (a run folder, a subcommand's own word)
        return set()


def test_every_mcp_tool_named_is_served() -> None:
    text = (DOCS / "SKILL.md").read_text()
    line = next(line for line in text.splitlines() if "`kbench mcp`" in line)
    paragraph = text[text.index(line) :].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", paragraph)) - {"kbench"}
    served: set[str] = set()

    async def main() -> None:
        async with Client(build()) as c:
            served.update(t.name for t in (await c.list_tools()).tools)

    anyio.run(main)
    assert named and named <= served, named - served


def loop_commands() -> dict[int, list[str]]:
    """The commands of SKILL.md's numbered loop, by step, as written."""
    text = (DOCS / "SKILL.md").read_text()
    loop = text.split("## The loop", 1)[1].split("\n## ", 1)[0]
    steps: dict[int, list[str]] = {}
    for number, body in re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |\Z)", loop, re.S | re.M):
        spans = re.findall(r"`([^`]+)`", body.replace("\n   ", " "))
        steps[int(number)] = [s for s in spans if COMMAND.match(s)]
    return steps


@pytest.mark.slow
def test_the_loop_runs_as_written_in_a_fresh_folder_on_a_cpu(tmp_path: Path) -> None:
    """Every step a CPU can take, in a new folder with nothing set up, as SKILL.md writes it: list, check, profile
    (access mode where the step names a GPU mode, at small sizes), clone, compare, devlog, runs."""
    import json
    import os
    import shlex
    import subprocess
    import sys

    from tests.conftest import HAS_CUDA

    env = {k: v for k, v in os.environ.items() if k != "KBENCH_KERNEL_PATH"}
    env.update(KBENCH_RESIDENT="0", KBENCH_CACHE_DIR=str(tmp_path / ".cache"))
    small = ["--m=64", "--n=64", "--k=64"]

    def kbench(command: str, *more: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(command) + list(more)
        head = [sys.executable, "-m", "kbench.kernel"] if argv[:3] == ["python", "-m", "kbench.kernel"] else None
        argv = (head + argv[3:]) if head else [sys.executable, "-m", "kbench", *argv[1:]]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == code, (command, done.stderr)
        return done

    def sized(command: str, mode: str = "access") -> list[str]:
        words = [w for w in shlex.split(command) if not w.startswith(("--m=", "--n=", "--k=", "--prof_type="))]
        return [shlex.join(words), *small, f"--prof_type={mode}"]

    steps = loop_commands()
    assert kbench(steps[1][0]).stdout.startswith("fork_join:")
    assert kbench(steps[2][0]).stdout.rstrip().endswith("pass")
    profile, on_cpu = steps[3][0], steps[3][1]
    assert "--prof_type=event" in profile and "--prof_type=access" in on_cpu
    if not HAS_CUDA:  # as written, the step needs a GPU: it says so, naming what runs on a CPU
        said = kbench(profile, code=3).stderr
        assert "--prof_type=access" in said and "kbench check" in said
    kbench(*sized(on_cpu))
    (v2_run,) = (tmp_path / "out" / "profiles" / "access" / "matmul").glob("*/*")
    clone = kbench(steps[5][0]).stdout.splitlines()[-1]
    assert clone.startswith("profile it: python -m kbench.kernel my_matmul v3 --kernel-path ")
    kbench(*sized(clone.removeprefix("profile it: ")))
    (v3_run,) = (tmp_path / "out" / "profiles" / "access" / "my_matmul").glob("*/*")
    runs = {"RUN_V2": str(v2_run), "RUN_V3": str(v3_run), "RUN": str(v3_run)}

    def placed(command: str) -> str:
        return re.sub(r"\bRUN(_V[23])?\b", lambda m: runs[m.group(0)], command)

    compare, as_json = (c for c in steps[6] if "RUN_V2" in c)
    assert "Interpreter time (us; CPU, not GPU time)" in kbench(placed(compare)).stdout
    assert json.loads(kbench(placed(as_json)).stdout)["a"] == str(v2_run)
    (previous,) = (c for c in steps[6] if "--previous" in c)  # the copy's first run: the shipped package's before it
    assert f"A: `{v2_run}` matmul v2 (access)" in kbench(placed(previous)).stdout
    (devlog,) = steps[7]
    kbench(placed(devlog))
    assert "- why it worked or not" in (tmp_path / "docs" / "kernels" / "my_matmul.md").read_text()
    (listed,) = steps[8]
    assert [r["version"] for r in json.loads(kbench(listed).stdout)] == ["v2"]
