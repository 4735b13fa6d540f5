"""Event mode's sampled counters against ncu's replayed ones, and what sampling costs the timings:
`python -m tests.benchmark.bench_sampling [OUT]` on a CUDA machine with cupti-python (clocks left alone:
KBENCH_LOCK_CLOCKS=0; ncu --clock-control none, as kbench always runs it there).

Each plan runs as a user would type it (a fresh process each): event mode with PM sampling, annotation mode (ncu's
replay of the same stages, caches flushed by both), then event mode with sampling off (KBENCH_SAMPLING=0). Printed,
per stage: its duration, the samples behind the sampled figures, sampled vs replayed DRAM% and TC% (annotation's TC%
is ncu's hmma pipe % of its *active* cycles; the sampled one the whole tensor pipe % of *elapsed* cycles:
sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed, see the module docs), and the stage's median with
sampling on against off (sampling runs in a round of its own after the timings: the collector is enabled, not
started, while they run). `--plans=pkg:ver,...` picks fewer; `--interval-us=X` samples at X us (the sampled run's
KBENCH_SAMPLING_INTERVAL_US) and `--no-off` leaves out the run with sampling off.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from kbench.capture.tools import run

VAL = "tests/data/validation"
PLANS: list[tuple[str, str, list[str]]] = [
    ("vector_add", "base", []),
    ("vector_add", "base", ["--n=1048576"]),
    ("matmul", "v2", []),
    ("matmul", "torch_mm", []),
    ("fork_join", "base", []),
    ("mla_decode", "v6", ["--b=32", "--s=16", "--t=4096"]),
    ("mla_decode", "v6", ["--b=32", "--s=1", "--t=8192"]),
    ("tile_mm", "base", ["--kernel-path", VAL]),
    ("tile_mm", "fma", ["--kernel-path", VAL]),
    ("convert", "torch_cast", ["--kernel-path", VAL]),
    ("sfu", "per_term", ["--kernel-path", VAL]),
    ("divmod", "modulo", ["--kernel-path", VAL]),
    ("splitk", "serial_combine", ["--kernel-path", VAL]),
    ("underfilled", "before", ["--kernel-path", VAL]),
    ("stream", "many", ["--kernel-path", VAL]),
]


def profile(pkg: str, ver: str, args: list[str], mode: str, out: Path, env: dict[str, str]) -> dict[str, Any] | None:
    tag = f"{env.get('KBENCH_SAMPLING', '1')}-{env.get('KBENCH_SAMPLING_INTERVAL_US', '')}"
    log = out / "logs" / f"{mode}-{pkg}-{ver}-{'_'.join(a.strip('-') for a in args if '/' not in a)}-{tag}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "kbench.kernel", pkg, ver, *args, f"--prof_type={mode}", "--out", str(out / "p")]
    done = run(argv, timeout_s=600, log_path=log, env={**os.environ, "KBENCH_LOCK_CLOCKS": "0", **env})
    found = re.findall(r"wrote (\S+)", log.read_text(errors="replace"))
    if done.returncode != 0 or not found:
        print(f"  {pkg} {ver} {' '.join(args)} {mode}: exit {done.returncode}; see {log}")
        return None
    folder = Path(found[-1].rstrip("/"))
    folder = folder if folder.is_dir() else folder.parent
    report: dict[str, Any] = json.loads((folder / "report.json").read_text())
    report["_folder"] = str(folder)
    return report


def _v(stage: dict[str, Any], key: str) -> float | None:
    value = stage.get(key, {}).get("value")
    return None if value is None else float(value)


def _cell(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "out/bench-sampling")
    picked = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--plans=")), None)
    interval = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--interval-us=")), None)
    sampling = {"KBENCH_SAMPLING_INTERVAL_US": interval} if interval else {}
    rows = []
    print(
        "| plan | stage | us | samples | DRAM% sampled | DRAM% ncu | diff | TC% sampled | TC% ncu (hmma, active) "
        "| diff | Issue% sampled | Issue% ncu | us sampling off | on/off |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for pkg, ver, args in PLANS:
        if picked and f"{pkg}:{ver}" not in picked:
            continue
        on = profile(pkg, ver, args, "event", out, sampling)
        ncu = profile(pkg, ver, args, "annotation", out, {})
        off = None if "--no-off" in sys.argv else profile(pkg, ver, args, "event", out, {"KBENCH_SAMPLING": "0"})
        if on is None:
            continue
        sampled = {s["stage"]: s for s in (on["sections"].get("sampling") or {}).get("stages", [])}
        counted = {s["name"]: s for s in (ncu or {}).get("stages", [])}
        timed_off = {s["name"]: s for s in (off or {}).get("stages", [])}
        label = f"{pkg} {ver} {' '.join(a for a in args if a.startswith('--') and a != '--kernel-path')}".strip()
        for s in on["stages"]:
            name = s["name"]
            us = _v(s, "duration_us")
            c = counted.get(name, {})
            d_s, d_c, t_s, t_c = _v(s, "dram_pct"), _v(c, "dram_pct"), _v(s, "tc_pct"), _v(c, "tc_pct")
            i_s, i_c = _v(s, "issue_roof_pct"), _v(c, "issue_roof_pct")
            us_off = _v(timed_off.get(name, {}), "duration_us")
            row = {
                "plan": label,
                "stage": name,
                "us": us,
                "samples": (sampled.get(name) or {}).get("samples"),
                "dram_sampled": d_s,
                "dram_ncu": d_c,
                "tc_sampled": t_s,
                "tc_ncu": t_c,
                "issue_sampled": i_s,
                "issue_ncu": i_c,
                "us_off": us_off,
                "folders": [r["_folder"] for r in (on, ncu, off) if r],
            }
            rows.append(row)
            diff = lambda a, b: None if a is None or b is None else a - b  # noqa: E731
            ratio = None if us is None or not us_off else 100.0 * (us / us_off - 1.0)
            print(
                f"| {label} | {name} | {_cell(us, 2)} | {_cell(row['samples'])} | {_cell(d_s)} | {_cell(d_c)} | "
                f"{_cell(diff(d_s, d_c))} | {_cell(t_s)} | {_cell(t_c)} | {_cell(diff(t_s, t_c))} | {_cell(i_s)} | "
                f"{_cell(i_c)} | {_cell(us_off, 2)} | {_cell(ratio, 2)}% |",
                flush=True,
            )
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    long = [r for r in rows if (r["us"] or 0) >= 50 and r["dram_sampled"] is not None and r["dram_ncu"] is not None]
    within = [r for r in long if abs(r["dram_sampled"] - r["dram_ncu"]) <= 5.0]
    print(f"\nstages >= 50 us with both DRAM figures: {len(long)}; within 5 points: {len(within)}")
    timed = [r for r in rows if r["us"] and r["us_off"]]
    near = [r for r in timed if abs(r["us"] / r["us_off"] - 1.0) <= 0.01]
    print(f"stages timed with sampling on and off: {len(timed)}; within 1%: {len(near)}")


if __name__ == "__main__":
    main()
