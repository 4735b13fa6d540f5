"""scripts/ says what is there: each file is named for its job (never after the issue it was written for), and every
`scripts/<file>` the docs, tests, scripts and settings name exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
NAMED = re.compile(r"\bscripts/([A-Za-z0-9_.-]+\.(?:sh|py))\b")
# captured output keeps the names it printed then (a log quotes the script that wrote it)
RECORDS = (".log", ".txt", ".json", ".csv")


def test_no_script_is_named_after_an_issue() -> None:
    assert [p.name for p in (ROOT / "scripts").iterdir() if re.search(r"issue\d", p.name)] == []


def naming_files() -> list[Path]:
    """Where a script is named: README, settings, docs, code and scripts, tests/data's READMEs (not its captures)."""
    files = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for folder in ("docs", "tests", "scripts", "src", ".ci"):
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix not in RECORDS]
    data = ROOT / "tests" / "data"
    return [p for p in files if not p.is_relative_to(data) or p.name == "README.md"]


def test_every_script_the_project_names_exists() -> None:
    missing = []
    for path in naming_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue  # a binary capture
        missing += [
            f"{path.relative_to(ROOT)}: scripts/{n}" for n in NAMED.findall(text) if not (ROOT / "scripts" / n).exists()
        ]
    assert missing == []
