"""The project stands alone: a fresh clone has no `../shared` beside it, so no test, source file, CI script or
project setting reads it (the real captures the tests use live in tests/data). Mentions in docstrings and comments
(where a copy came from) are fine; a path built to the sibling folder is not."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SIBLING = re.compile(r"\.\.[/\\]+shared\b")


def _mentions(tree: ast.AST) -> set[int]:
    """Strings that only mention a path: docstrings, and needles looked for in a text (`"../shared" not in t`)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
        elif isinstance(node, ast.Compare) and all(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            found.add(id(node.left))
    return found


def _climbs(node: ast.AST) -> bool:
    """The expression goes up from where it starts: `.parent`, `.parents[i]`, or a `..` part."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in ("parent", "parents"):
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.rstrip("/\\").endswith(".."):
            return True
    return False


def _names_shared(node: ast.AST) -> bool:
    """A path part `shared` first: `"shared"`, `"shared/fixtures"`."""
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.match(r"shared(?:[/\\]|$)", node.value) is not None
    )


def python_reads(source: str) -> list[int]:
    """Lines of a Python source that build a path to `../shared`: a string holding `../shared` (not a mention),
    `<something>.parent(s) / "shared"`, or `join(..., "..", "shared")`."""
    tree = ast.parse(source)
    docs = _mentions(tree)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if SIBLING.search(node.value):
                lines.append(node.lineno)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if _names_shared(node.right) and _climbs(node.left):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            args = node.args
            if any(_names_shared(b) and _climbs(a) for a, b in itertools.pairwise(args)):
                lines.append(node.lineno)
    return sorted(set(lines))


def line_reads(source: str) -> list[int]:
    """Lines of a shell script or TOML file that name `../shared` outside a comment."""
    return [n for n, line in enumerate(source.splitlines(), 1) if SIBLING.search(re.sub(r"(^|\s)#.*", "", line))]


def project_files() -> Iterator[Path]:
    for folder in ("src", "tests", "scripts"):
        yield from sorted((ROOT / folder).rglob("*.py"))
    yield from sorted((ROOT / "scripts").glob("*.sh"))
    yield from sorted(p for p in (ROOT / ".ci").rglob("*") if p.is_file())
    yield ROOT / "pyproject.toml"


@pytest.mark.slow
def test_no_test_source_or_ci_file_reads_the_sibling_shared_folder() -> None:
    readers = []
    for path in project_files():
        if path == Path(__file__):
            continue  # this file's examples below
        text = path.read_text()
        found = python_reads(text) if path.suffix == ".py" else line_reads(text)
        readers += [f"{path.relative_to(ROOT)}:{n}" for n in found]
    assert readers == [], "a fresh clone has no ../shared; copy what these read into tests/data"


@pytest.mark.parametrize(
    "source",
    [
        'FIXTURES = Path(__file__).parents[2] / "shared" / "fixtures" / "h100"',
        'path = Path(__file__).parents[2] / "shared/fixtures/h100" / f"{name}.ncu-rep"',
        'shared = ROOT.parent / "shared" / "tools" / "check_report.py"',
        'p = Path("..") / "shared"',
        'p = os.path.join(ROOT, "..", "shared", "spec")',
        'open("../shared/spec/style.md")',
    ],
)
def test_a_path_to_the_sibling_folder_is_found(source: str) -> None:
    assert python_reads(source) == [1]


@pytest.mark.parametrize(
    "source",
    [
        '"""Copied from ../shared/fixtures (see its README)."""',
        "x = 1  # a copy of ../shared/tools/check_report.py",
        'folder = tmp_path / "shared"',
        'assert "../shared" not in readme',
        'def f():\n    """Read ../shared? never."""\n    return "shared memory"',
    ],
)
def test_a_mention_or_an_unrelated_shared_folder_is_not(source: str) -> None:
    assert python_reads(source) == []


def test_a_shell_or_toml_comment_is_not_a_read() -> None:
    assert line_reads("# CI runs with ../shared beside it\ncp ../shared/x . # copy\necho ok  # ../shared\n") == [2]
