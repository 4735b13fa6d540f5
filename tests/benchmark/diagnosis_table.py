"""The diagnosis validation table, re-analysed by the code at hand from the committed captures (no GPU needed):
every before/after pair of tests/test_diagnosis.py, in each mode both versions were captured in, with the defective
version's Top 1 (a named mechanism, or the unexplained rest where none was found), its estimated gain, the gain its
fixed twin realized and their ratio. docs/diagnosis.md carries its output.

    python -m tests.benchmark.diagnosis_table
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.test_diagnosis import MODES, PAIRS, folder_of, realized, top


def rows(tmp: Path) -> list[str]:
    out = []
    for before, after, _, _, _ in PAIRS:
        for mode in MODES.values():
            if not all(folder_of(r, mode).is_dir() for r in (before, after)):
                continue  # not captured in this mode
            opps, _ = top(before, mode, tmp)
            first = opps[0]
            gain = realized(before, after, mode)
            name = first.name if len(first.name) <= 110 else first.name[:107] + "..."
            out.append(
                f"| {before} -> {after.rpartition('/')[2]} | {mode} | {name} | {first.gain_pct:.1f}% | {gain:.1f}% | "
                f"{first.gain_pct / gain:.2f} |"
            )
    return out


def main() -> None:
    print("| pair | mode | Top 1 of the defective version | est. gain | realized | est. / realized |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows(Path(tmp)):
            print(r)


if __name__ == "__main__":
    main()
