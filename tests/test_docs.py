"""The README is tested: its two commands, its plan example, the commands it documents, and CI's use of it."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HAS_CUDA, contract_problems

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()


def block_after(marker: str) -> str:
    m = re.search(rf"<!-- {marker} -->\n```\w+\n(.*?)\n```", README, re.S)
    assert m, marker
    return m.group(1)


def test_quick_start_has_exactly_two_commands() -> None:
    quick = README.split("## Quick start")[1].split("\n## ")[0]
    assert len(re.findall(r"```bash\n", quick)) == 2
    assert block_after("main-command") == "pip install . && python -m kbench.kernel vector_add --prof_type=event"
    assert block_after("test-command").endswith("python -m pytest")


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- test-command -->" in ci and 'bash -c "$cmd"' in ci


def test_the_readme_names_a_fast_tier_that_the_suite_knows() -> None:
    """The inner loop's command is in the Quick start, and its marker is one pytest registers (--strict-markers)."""
    quick = README.split("## Quick start")[1].split("\n## ")[0]
    assert '`python -m pytest -m "not slow"`' in quick
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("slow: ") for m in markers)


def test_every_command_and_option_is_documented() -> None:
    top = subprocess.run([sys.executable, "-m", "kbench", "--help"], capture_output=True, text=True, timeout=60)
    for cmd in ("profile", "check", "analyze", "list"):
        assert re.search(rf"\b{cmd}\b", top.stdout) and f"kbench {cmd}" in README, cmd
    for option in (
        "--prof_type",
        "--list",
        "--predict",
        "--device",
        "--out",
        "--bench-runs",
        "--check/--no-check",
        "--cuda-graph",
        "--baseline",
        "--kernel-path",
        "--verbose",
        "--timeout",
        "--timeline-backend",
        "--lock-clocks/--no-lock-clocks",
        "--no-wait",
        "lock-gpu-clock.sh",
        "reset-gpu-clock.sh",
        "--mode",
        "--plan",
    ):
        assert option in README, option


@pytest.mark.slow
def test_the_plan_example_is_complete_and_correct(tmp_path: Path) -> None:
    pkg = tmp_path / "relu"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""ReLU, from the README."""\n')
    (pkg / "base.py").write_text(block_after("plan-example") + "\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run(
        [sys.executable, "-m", "kbench", "check", "relu", "--kernel-path", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip().endswith("all 2 configuration(s) pass")
    where = "CUDA GPU" if HAS_CUDA else "Triton interpreter"
    assert where in p.stdout


# sha256 of shared/tools/check_report.py as copied (c9d0fa3): a new copy of the checker updates it, an edit fails
CHECKER_SHA256 = "a8c15ef85a32e8ac33184f10c2e232795b2a46719bef154b0702d4f390059c4e"


def test_contract_checker_copy_is_unchanged() -> None:
    copy = (ROOT / "tests" / "contract" / "check_report.py").read_bytes()
    assert hashlib.sha256(copy).hexdigest() == CHECKER_SHA256


def test_committed_example_reports_follow_the_contract() -> None:
    reports = sorted((ROOT / "docs" / "examples").rglob("report.md"))
    assert reports, "docs/examples holds real report folders"
    for report in reports:
        assert contract_problems(report) == [], report


DOCS = {"README.md": ROOT / "README.md", "SKILL.md": ROOT / "docs" / "agents" / "SKILL.md"}
PATH_TOKEN = re.compile(r"`((?:docs|scripts|tests|conf|src|\.ci)/[^`\s]*)`")
LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s#]+)")
MODULE = re.compile(r"\bkbench(?:\.[a-z_][a-z0-9_]*)+")


def test_the_report_contract_lives_in_the_project() -> None:
    """A clone has no ../shared: the contract is docs/report-contract.md, which names what the checker checks."""
    from tests.contract import check_report

    contract = (ROOT / "docs" / "report-contract.md").read_text()
    for heading in check_report.CONTRACT_HEADINGS:
        assert heading in contract, heading
    assert "| " + " | ".join(check_report.STAGES_HEADER) + " |" in contract
    for name, path in DOCS.items():
        assert "../shared" not in path.read_text(), name


def test_readme_and_skill_name_only_files_and_modules_that_exist() -> None:

    for name, path in DOCS.items():
        text = path.read_text()
        for token in PATH_TOKEN.findall(text):
            if any(c in token for c in "<*{$"):
                continue  # a pattern, not a path
            assert (ROOT / token.rstrip(".,:;")).exists(), f"{name} names {token}, which does not exist"
        prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
        for target in LINK.findall(prose):
            assert (path.parent / target).exists(), f"{name} links {target}, which does not exist"
    texts = [p.read_text() for p in DOCS.values()] + [(ROOT / "conf" / "devices.json").read_text()]
    for text in texts:
        for dotted in sorted(set(MODULE.findall(text))):
            assert resolves(dotted), f"{dotted} is named in the docs but is neither a module nor an attribute of one"


def resolves(dotted: str) -> bool:
    """Whether ``kbench.a.b.c`` is a module, or an attribute of one, left to right."""
    import importlib

    parts = dotted.split(".")
    obj: object = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 2):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            return False
    return True


def test_help_mcp_and_api_describe_every_mode_from_one_table() -> None:
    import kbench.api
    from kbench.cli import kernel, mcp_server
    from kbench.modes import registry

    assert list(registry.SUMMARY) == registry.names()
    for name, what in registry.SUMMARY.items():
        assert f"{name}: {what}" in kernel.EPILOG and f"{name}: {what}" in mcp_server.PROFILE
        assert what in (getattr(kbench.api, f"{name}_profile_plan").__doc__ or "")
    assert "CUPTI" in registry.SUMMARY["event"] and "CUDA events" not in kernel.EPILOG


@pytest.mark.slow
def test_quick_start_shows_the_command_that_runs_without_a_gpu_and_it_runs(tmp_path: Path) -> None:
    """A newcomer on a CPU: the Quick start names access mode's command, and that command writes a report here."""
    quick = README.split("## Quick start")[1].split("\n## ")[0]
    (command,) = [c for c in re.findall(r"`([^`\n]+)`", quick) if "--prof_type=access" in c]
    assert command.startswith("python -m kbench.kernel ")
    argv = [sys.executable, "-m", "kbench.kernel", *command.split()[3:]]
    env = {**os.environ, "KBENCH_RESIDENT": "0", "KBENCH_CACHE_DIR": str(tmp_path / ".cache")}
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    (report,) = (tmp_path / "out" / "profiles" / "access").rglob("report.md")
    assert contract_problems(report) == []


def test_the_cpu_install_step_works_from_the_package_registry_alone() -> None:
    """A machine that reaches PyPI and nothing else: the README says what works there (the CUDA build from PyPI, or
    the CPU build's wheel file installed first), not only PyTorch's own index, which such a machine cannot reach."""
    step = README[README.index("On a machine without a GPU, from the package registry") :].split("\n\n")[0]
    step = " ".join(step.split())
    assert "download.pytorch.org" in step  # where it is reachable
    assert "PyPI has no CPU-only torch for Linux x86_64" in step
    assert "`pip install ./torch-" in step and "--find-links DIR" in step
    ci = (ROOT / ".ci" / "run").read_text()
    pinned = re.search(r"pip install -q torch==(\S+)", ci)
    assert pinned and f"torch=={pinned.group(1)} --find-links DIR" in step  # the version CI installs that way
