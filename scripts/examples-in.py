"""Put the run folders scripts/gpu-examples.sh made into docs/examples: `python scripts/examples-in.py RESULTS_DIR`.

For each example (a folder under RESULTS_DIR holding exactly one run folder), the example's old files are removed
(its README.md stays) and the run folder's are copied in, except what is too large or rebuilt from the capture: the
`compiled/` folder (its listing `compiled-listing.txt` stays), kbench's own `trace.json`, `timeline.csv`,
`timeline.sqlite` (none of them came back from the device), and captures over 1 MB (a 1.6 MB ncu-mode .ncu-rep,
a 2.9 MB PyTorch trace): they are named in NOT_KEPT.txt with their size. Then `python -m tests.example_reports
--write` re-analyses the captures that were kept.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
LARGE = 1 << 20
SKIP_DIRS = {"compiled"}


def run_folder(example: Path) -> Path:
    found = [p.parent for p in example.rglob("params.json")]
    if len(found) != 1:
        raise SystemExit(f"{example}: {len(found)} run folders, expected 1")
    return found[0]


def put(run: Path, dest: Path) -> list[str]:
    """Copy ``run``'s files into ``dest`` (emptied first but for README.md); what was left out, with sizes."""
    if dest.exists():
        for old in dest.iterdir():
            if old.name == "README.md":
                continue
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    left: list[str] = []
    for src in sorted(run.rglob("*")):
        rel = src.relative_to(run)
        if src.is_dir() or rel.parts[0] in SKIP_DIRS:
            continue
        if src.stat().st_size > LARGE:
            left.append(f"{rel}\t{src.stat().st_size} bytes")
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest / rel)
    if left:
        (dest / "NOT_KEPT.txt").write_text("left out to keep the repository small:\n" + "\n".join(left) + "\n")
    return left


def main() -> None:
    results = Path(sys.argv[1])
    examples = sorted({p.parent.relative_to(results).parts[0] for p in results.rglob("params.json")})
    for top in examples:
        inner = results / top
        nested = [d for d in inner.iterdir() if d.is_dir() and list(d.rglob("params.json")) and d.name not in
                  {"event", "annotation", "ncu", "nsys", "proton", "intra"}]  # fmt: skip
        for example in nested or [inner]:
            dest = EXAMPLES / example.relative_to(results)
            left = put(run_folder(example), dest)
            print(
                f"{dest.relative_to(ROOT)}" + (f" (left out: {', '.join(x.split()[0] for x in left)})" if left else "")
            )


if __name__ == "__main__":
    main()
