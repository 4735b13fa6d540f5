"""The diagnosis validation table, re-analysed by the code at hand from the committed captures (no GPU needed):
every before/after pair of tests/test_diagnosis.py, in each mode both versions were captured in, with the defective
version's Top 1 (a named mechanism, or the unexplained rest where none was found), its estimated gain, the gain its
fixed twin realized, their ratio, and the points of the defective version's distance to its roof that no step of its
waterfall explains (kbench.analysis.waterfall; n/a without a roof or for a committed result read as captured).
docs/diagnosis.md carries its output.

Pairs captured for issue 42 (tests/data/issue42_h100/<mode>/<kernel>-<version>/) are listed too: those PAIRS names as
"issue42_h100/<kernel>-<version>", and those its pairs.json lists as [["<before>", "<after>"], ...] (run names
without the folder). A counter-mode run committed without its .ncu-rep shows the Top 1 its result.json holds, marked
so (not re-analysed). A pair whose analysis fails gets a row saying so; a realized gain of 0 or less has no ratio.

    python -m tests.benchmark.diagnosis_table
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tests.conftest import DATA
from tests.test_diagnosis import MODES, PAIRS, analysed, folder_of, realized

ISSUE42 = "issue42_h100"


def pairs() -> list[tuple[str, str]]:
    """PAIRS, then those tests/data/issue42_h100/pairs.json adds (each once)."""
    out = list(dict.fromkeys((before, after) for before, after, *_ in PAIRS))  # a pair checked per mode: once
    listed = DATA / ISSUE42 / "pairs.json"
    if listed.is_file():
        extra = [(f"{ISSUE42}/{b}", f"{ISSUE42}/{a}") for b, a in json.loads(listed.read_text())]
        out += [p for p in extra if p not in out]
    return out


def unpaired(listed: list[tuple[str, str]]) -> list[str]:
    """Runs under tests/data/issue42_h100 (as <mode>/<run>) no pair names: said on stderr, so that none is left out
    unseen."""
    folder = DATA / ISSUE42
    named = {r for p in listed for r in p}
    runs = {r.name for m in MODES.values() if (folder / m).is_dir() for r in (folder / m).iterdir() if r.is_dir()}
    return sorted(r for r in runs if f"{ISSUE42}/{r}" not in named)


def committed(before: str, mode: str) -> tuple[str, float] | None:
    """The Top 1 a counter-mode run's committed result.json holds, where no .ncu-rep was committed to re-analyse."""
    folder = folder_of(before, mode)
    if mode == "event" or any((folder / f).exists() for f in ("profile.ncu-rep", "profile.ncu-rep.xz")):
        return None
    first = json.loads((folder / "result.json").read_text())["figures"]["opportunities"][0]
    return f"[as captured, no .ncu-rep committed] {first['name']}", float(first["gain_pct"])


def row(before: str, after: str, mode: str, tmp: Path) -> str:
    pair = f"{before} -> {after.rpartition('/')[2]}"
    try:
        found = committed(before, mode)
        by_events = False
        left = "n/a"
        if found is None:
            figures = analysed(before, mode, tmp)
            first = figures.opportunities[0]
            found = first.name, first.gain_pct
            if figures.waterfalls:  # the distance no step of the before's waterfall explains, in points
                left = f"{sum(w.unexplained_points for w in figures.waterfalls):.1f}"
            # a host-time item's gain counts the stage at its CUDA-event time: realized on that time too
            by_events = first.metric.endswith(".host_gap_pct")
        gain = realized(before, after, mode, by_events=found is not None and by_events)
    except Exception as e:  # a row that says why, and the rest of the table still printed
        return f"| {pair} | {mode} | (not analysed: {type(e).__name__}: {str(e)[:80]}) | n/a | n/a | n/a | n/a |"
    name, est = found
    name = name if len(name) <= 110 else name[:107] + "..."
    ratio = f"{est / gain:.2f}" if gain > 0 else "n/a (no gain realized)"
    return f"| {pair} | {mode} | {name} | {est:.1f}% | {gain:.1f}% | {ratio} | {left} |"


def rows(tmp: Path) -> list[str]:
    out = []
    for before, after in pairs():
        for mode in MODES.values():
            if all(folder_of(r, mode).is_dir() for r in (before, after)):  # else: not captured in this mode
                out.append(row(before, after, mode, tmp))
    return out


def main() -> None:
    print(
        "| pair | mode | Top 1 of the defective version | est. gain | realized | est. / realized | unexplained points |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows(Path(tmp)):
            print(r)
    if left := unpaired(pairs()):
        print(
            f"runs in tests/data/{ISSUE42} in no pair (list them in its pairs.json): {', '.join(left)}", file=sys.stderr
        )


if __name__ == "__main__":
    main()
