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

import importlib.util
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
DATA = ROOT / "tests" / "data"
SUFFIXES = {".ncu-rep", ".sqlite", ".hatchet"}
TRACES = {"pytorch_trace.json"}  # kbench's own trace.json (for Perfetto) is refused by analyze, by design
WRITTEN = ("report.md", "report.json", "result.json")
PICTURES = ("roofline.png", "timeline.png", "distance.png")  # drawn again from the capture by today's code
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


def reports() -> list[Path]:
    """Every committed report kbench wrote: a markdown file under docs/examples or tests/data that opens with a
    profile's title (report.md, report-live.md and the reports kept under other names)."""
    found = [p for root in (EXAMPLES, DATA) for p in root.rglob("*.md")]
    return sorted(p for p in found if p.read_text(errors="replace").startswith("# Profile: "))


# a quoted source line: ``v8.py:87 `mbarrier.wait(bars.index(X_SUM), j & 1)` ``
QUOTE = re.compile(r"([\w.-]+\.py):(\d+) `([^`]+)`")


def sources_of(kernel: str, name: str) -> list[Path]:
    """The files named ``name`` of kernel package ``kernel`` in this repository: a shipped kernel's, or a test kernel
    package's under tests/data (the validation kernels and the like)."""
    shipped = ROOT / "src" / "kbench" / "kernel" / kernel / name
    return [p for p in [shipped, *sorted(DATA.glob(f"*/{kernel}/{name}"))] if p.is_file()]


def library(name: str) -> bool:
    """A file of Triton's own (triton/language/standard.py): a line of it is not this repository's to check."""
    spec = importlib.util.find_spec("triton")
    root = Path(spec.origin).parent if spec is not None and spec.origin else None
    return root is not None and any(root.rglob(name))


def misquoted(report: Path) -> tuple[list[str], int]:
    """Each ``file:line `text` `` quote of ``report`` whose line in the repository does not hold that text (or whose
    file is neither in the repository nor Triton's), and how many quotes were checked against a file here."""
    text = report.read_text()
    title = re.match(r"# Profile: (\S+)", text)
    kernel = title.group(1) if title else ""
    wrong, checked = [], 0
    for name, number, quoted in QUOTE.findall(text):
        files = sources_of(kernel, name)
        if not files:
            if not library(name):
                wrong.append(f"{name}:{number} `{quoted}`: no {name} of kernel package {kernel} in the repository")
            continue
        checked += 1
        held = [f.read_text().splitlines() for f in files]
        if not any(0 < int(number) <= len(lines) and lines[int(number) - 1].strip() == quoted for lines in held):
            now = sorted({i for lines in held for i, line in enumerate(lines, 1) if line.strip() == quoted})
            wrong.append(f"{name}:{number} `{quoted}`: the line does not hold it (it is at {now or 'no line'})")
    return wrong, checked


def table(text: str, header: str) -> list[list[str]]:
    """The rows of the markdown table that starts with ``header`` (cells stripped), [] where there is none."""
    if header not in text:
        return []
    block = text.split(header, 1)[1].split("\n\n", 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[1:]]


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


KERNEL_TIMES = "Kernel time against the Duration"  # the block under the Kernels table naming each stage that differs
ROUNDED = 0.005  # half of the last digit a report writes a time in (us, two decimals)
MEDIANS = 0.01  # each kernel's median summed against the median of their sums per run (nsys's Kernel time column)


def disagreeing(text: str) -> list[str]:
    """Where a report gives a stage's time twice and the two disagree without a line saying why: the Kernels table's
    sum outside the range of the Duration's own repetitions (the Timing table's min and max; the Duration itself where
    there is none) with no line for the stage under KERNEL_TIMES; a Host time or Environment line quoting the
    stage's CUPTI (or ncu) time as other than its Duration."""
    durations = {r[0]: _number(r[1]) for r in table(text, "| Stage | Duration (us) |")}
    spread = {r[0]: (_number(r[4]), _number(r[5])) for r in table(text, "| Stage | Median (us) |")}
    summed: dict[str, tuple[float, int]] = {}
    for r in table(text, "| Stage | Kernel | Launches |"):
        if (us := _number(r[6])) is not None:
            total, n = summed.get(r[0], (0.0, 0))
            summed[r[0]] = (total + us, n + 1)
    said = text.split(KERNEL_TIMES, 1)[1].split("\n\n", 1)[0] if KERNEL_TIMES in text else ""
    explained = {m for m in re.findall(r"^- (\S+): ", said, re.M)}
    # nsys mode's Timeline table gives both, each under its name: the GPU span (the Duration) and the kernel time
    spans = {r[0]: (_number(r[5]), _number(r[6])) for r in table(text, "| Stage | Streams | Kernels | Runs |")}
    out = []
    for stage, (total, n) in summed.items():
        duration = durations.get(stage)
        if duration is None:
            continue
        low, high = spread.get(stage, (duration, duration))
        low, high = (duration if low is None else low), (duration if high is None else high)
        span, kernel_time = spans.get(stage, (None, None))
        if span == duration and kernel_time is not None and abs(kernel_time - total) <= MEDIANS * kernel_time:
            continue  # the Timeline row names both under its legend: its GPU span is the Duration, its kernel time
        if not low - (n + 1) * ROUNDED <= total <= high + (n + 1) * ROUNDED and stage not in explained:
            out.append(f"{stage}: the Kernels table sums {total:.2f} us against the {duration:.2f} us Duration")
    quoted = [
        *re.findall(r"^- (\S+): [\d.]+ us by CUDA events against ([\d.]+) us of kernels \(CUPTI", text, re.M),
        *re.findall(r"^- (\S+): CUDA events [\d.]+ us, CUPTI ([\d.]+) us \(", text, re.M),
        *re.findall(r"^- (\S+): ncu ([\d.]+) us, CUDA events [\d.]+ us in the same process \(", text, re.M),
    ]
    for stage, us in quoted:
        duration = durations.get(stage)
        if duration is not None and abs(float(us) - duration) > 2 * ROUNDED:
            out.append(f"{stage}: {us} us quoted as its kernels' time against the {duration:.2f} us Duration")
    return out


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
