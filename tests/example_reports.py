"""The committed examples whose capture is kept, re-analysed by today's code.

Each capture in docs/examples that `kbench analyze` reads (an .ncu-rep, an nsys SQLite export, a PyTorch-profiler
trace, a Proton .hatchet; not kbench's own trace.json for viewing) lies in the run folder the live run wrote.
tests/test_examples.py re-analyses every one (with the plan its params.json names) and wants each section of that
report.md in the committed one, the same line for line: all but Environment and Open next (what the capture's
circumstances fill: clocks, tools, the files beside it) and the timeline's "Captured by" line. A live report of
today's code has them all (and its live-only sections: Conformance, Tiling), so a fresh example passes as it is;
`python -m tests.example_reports --write` rewrites the report.md, report.json and result.json of those that drifted
(code changed since their live run) with the capture's analysis, and ANALYZED.txt there says so. It also copies the
pictures that analysis draws (``PICTURES``) into every capture's folder, drifted or not: a picture is not compared
pixel for pixel, so without this one drawn by older code would stay.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
SUFFIXES = {".ncu-rep", ".sqlite", ".hatchet"}
TRACES = {"pytorch_trace.json"}  # kbench's own trace.json (for Perfetto) is refused by analyze, by design
WRITTEN = ("report.md", "report.json", "result.json")
PICTURES = ("roofline.png", "timeline.png")  # drawn again from the capture by today's code
SHIPPED = {"vector_add", "matmul", "fork_join", "mla_decode"}
VALIDATION = ROOT / "tests" / "data" / "validation"


def captures() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*") if p.suffix in SUFFIXES or p.name in TRACES)


def target(capture: Path) -> Path:
    """Where a capture's reports are committed: its run folder, or, where the live analysis failed there (FAILED.txt:
    the folder stays as the device left it), the sibling ``report/`` folder."""
    if (capture.parent / "FAILED.txt").exists():
        return capture.parent.parent / "report"
    return capture.parent


def plan_of(capture: Path) -> Any:
    """The plan the live run profiled (its params.json), or None for a capture without one."""
    from kbench.plan.discovery import load_version

    try:
        made = json.loads((capture.parent / "params.json").read_text())
    except (OSError, ValueError):
        return None
    if not made.get("kernel") or not made.get("version"):
        return None
    values = {k: str(v) for k, v in (made.get("params") or {}).items()}
    paths = [] if made["kernel"] in SHIPPED else [str(VALIDATION)]  # the diagnosis examples' validation kernels
    return load_version(made["kernel"], made["version"], paths).from_values(values)


def analysed(capture: Path, out: Path) -> Path:
    """The run folder `kbench analyze` writes for ``capture`` under ``out``."""
    from kbench import pipeline

    result = pipeline.analyze(capture, None, out, plan_of(capture))
    return Path(result.out_dir)


def drawn(run: Path) -> list[str]:
    """The pictures (``PICTURES``) an analysis drew into its run folder."""
    return [name for name in PICTURES if (run / name).is_file()]


APART = ("## Environment", "## Open next")  # filled by the capture's circumstances, live and offline differently


def sections(text: str) -> dict[str, list[str]]:
    """report.md by section heading (the title line under ""), each section's lines ("Captured by" lines left
    out)."""
    out: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line
            out[current] = []
        elif not line.startswith("Captured by"):
            out[current].append(line)
    return out


def drift(committed: str, fresh: str) -> list[str]:
    """The sections of the capture's analysis ``fresh`` that the committed report.md lacks or has otherwise."""
    have, want = sections(committed), sections(fresh)
    return [k or "(title)" for k, lines in want.items() if k not in APART and have.get(k) != lines]


def write() -> None:
    from kbench.version import __version__

    for capture in captures():
        with tempfile.TemporaryDirectory() as tmp:
            run = analysed(capture, Path(tmp))
            for name in drawn(run):
                shutil.copyfile(run / name, target(capture) / name)
            old = target(capture) / "report.md"
            if old.is_file() and not drift(old.read_text(), (run / "report.md").read_text()):
                continue  # a live report of today's code: kept
            for name in WRITTEN:
                shutil.copyfile(run / name, target(capture) / name)
        rel = capture.relative_to(target(capture).parent) if target(capture) != capture.parent else capture.name
        (target(capture) / "ANALYZED.txt").write_text(
            f"report.md, report.json and result.json here are `kbench analyze {rel}` (with the plan the live run's "
            f"params.json names) by kbench {__version__}: the live report had drifted from the code. tests/"
            "test_examples.py re-analyses the capture and diffs. The other files are the live run's.\n"
        )
        print(f"{target(capture).relative_to(ROOT)}: rewritten from {rel}")


if __name__ == "__main__":
    if "--write" not in sys.argv:
        sys.exit("usage: python -m tests.example_reports --write")
    write()
