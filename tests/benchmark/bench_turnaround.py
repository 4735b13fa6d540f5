"""Turnaround: wall seconds of a whole kbench command per mode and plan, and ratios to event mode:
`python -m tests.benchmark.bench_turnaround` on a CUDA machine (clocks left alone: KBENCH_LOCK_CLOCKS=0).

Each command runs as a user would type it (a fresh Python process, warm autotune and Triton caches after a first
unmeasured run), MODE_RUNS times in turn with the other modes (medians; one run of a mode varies by ~1 s);
`kbench analyze` is timed on the annotation run's .ncu-rep beside a bare
`ncu_report.load_report` of the same file and beside that load plus one metric read (ncu_report's metric library
loaded: the floor of any analysis), in turn, 11 rounds (medians). Commands go through kbench's one subprocess runner.
`--analyze=REP.ncu-rep` (repeatable) times only `kbench analyze` of the given captures that way, `--rounds=N` times
(no GPU needed). `--warm` runs the edit loop through the CLI and the resident kbench (``warm_loop``).
`--plans=a,b`, `--modes=event,annotation` and `--runs=N` pick fewer; each plan's line "event /
annotation = X" is the ratio the event-mode targets are stated in, with event mode's capture phase (the report's "Where
the capture's ... went") beside it.

Python's compiled bytecode is cached as in any installed environment: where this process may not write it
(PYTHONDONTWRITEBYTECODE, as on the lent H100 machine, whose packages were installed without it), the commands
write theirs under a temporary PYTHONPYCACHEPREFIX, so that a warm run does not compile pydantic, jinja2 and
kbench from source again (compiling made the earlier figures of `kbench analyze` ~0.5 s slower on the H100
machine: 0.89 against 0.40 s, the same code).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kbench.capture.tools import run

PLANS = ["vector_add", "matmul", "fork_join"]
MODES = ["event", "annotation", "ncu"]
ANALYZE_RUNS = 11
MODE_RUNS = 5


def timed(argv: list[str], log: Path, env: dict[str, str]) -> float:
    start = time.monotonic()
    done = run(argv, timeout_s=600, log_path=log, env={**os.environ, "KBENCH_LOCK_CLOCKS": "0", **env})
    took = time.monotonic() - start
    if done.returncode != 0:
        print(f"  {' '.join(argv[2:])} failed (exit {done.returncode}); see {log}")
    return took


def analyze_rounds(rep: Path, out: Path, env: dict[str, str], count: int) -> str:
    """`kbench analyze` of ``rep`` against a bare load_report of it and that load plus one metric, ``count`` rounds
    in turn after one that warms the caches; the medians and the median ratio, as a table cell."""
    py = sys.executable
    bare = f"import ncu_report; ncu_report.load_report({str(rep)!r})"
    floor = f"{bare}.range_by_idx(0).action_by_idx(0).metric_by_name('gpu__time_duration.sum')"
    rounds = [
        (
            timed([py, "-m", "kbench", "analyze", str(rep), "--out", str(out / "a")], out / "an.log", env),
            timed([py, "-c", bare], out / "bare.log", env),
            timed([py, "-c", floor], out / "floor.log", env),
        )
        for _ in range(count + 1)
    ][1:]  # the first round warms the file cache, the bytecode and the compiled report templates
    analyze, load, metric = (statistics.median(r[i] for r in rounds) for i in range(3))
    ratio = statistics.median(a / b for a, b, _ in rounds)
    return (
        f"{analyze:>8.2f}   ({ratio:.2f}x a bare load_report: {load:.3f} s; load and one metric: {metric:.3f} s; "
        f"medians of {count} rounds)"
    )


def _served(reports: list[Path]) -> str:
    """num_stages in the newest report's Tiling (the edit loop's check that the tiling on disk ran)."""
    import re

    found = re.search(r"num_stages=(\d+)", reports[-1].read_text()) if reports else None
    return found.group(1) if found else "n/a"


def warm_loop(out: Path, env: dict[str, str]) -> None:
    """The edit loop through the CLI, each step a fresh `python -m kbench.kernel` process as a user types it: a
    fresh-process profile (KBENCH_RESIDENT=0), then with the resident kbench (its own private runtime folder): the
    first call (it starts one and runs itself), the next ones (served), a clone v2 -> v9 and an edit of v9
    (num_stages 4 -> 3, size and mtime kept), v9 served twice; and a served annotation-mode matmul profile (the
    plan in a child under ncu) interrupted by SIGINT after 3 s (its exit code, its last line and how long the client
    took to end), then one more served call."""
    import signal
    import subprocess

    from tests.benchmark._xstages import edit_keeping_stat, package

    py = sys.executable
    kp = package(out)
    runtime = out / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    warm = {**env, "KBENCH_RESIDENT": "1", "XDG_RUNTIME_DIR": str(runtime)}
    cold = {**env, "KBENCH_RESIDENT": "0"}
    prof = [py, "-m", "kbench.kernel", "xstages", "--kernel-path", str(kp), "--prof_type=event", "--out"]

    def step(label: str, argv: list[str], extra: dict[str, str], version: str) -> None:
        wall = timed(argv, out / "warm.log", extra)
        reports = sorted((out / "w" / "event" / "xstages").rglob("report.md"), key=lambda p: p.stat().st_mtime)
        stages = _served(reports)
        print(f"{label:<58}{wall:>7.2f} s   version {version}, num_stages in its report {stages}", flush=True)
        if reports:  # where its capture's time went (params.json), the largest phases first
            phases = json.loads((reports[-1].parent / "params.json").read_text()).get("phases_s") or {}
            top = sorted(phases.items(), key=lambda kv: -kv[1])[:5]
            print(f"{'':<8}capture phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in top), flush=True)

    timed([*prof, str(out / "w"), "v2"], out / "warm.log", cold)  # caches warm: a user's second run
    print("warm loop (xstages: kbench's Triton matmul at one tiling; CLI, each step a fresh client process)")
    step("fresh process (KBENCH_RESIDENT=0), v2", [*prof, str(out / "w"), "v2"], cold, "v2")
    step("resident: first call (starts one, runs itself), v2", [*prof, str(out / "w"), "v2"], warm, "v2")
    sock = runtime / "kbench" / "resident-all.sock"
    for _ in range(600):
        if sock.exists():
            break
        time.sleep(0.1)
    step("resident: second call (served), v2", [*prof, str(out / "w"), "v2"], warm, "v2")
    step("resident: third call (served), v2", [*prof, str(out / "w"), "v2"], warm, "v2")
    timed([py, "-m", "kbench", "clone", "xstages", "v2", "v9", "--kernel-path", str(kp)], out / "warm.log", cold)
    edit_keeping_stat(kp / "xstages" / "v9.py", '"num_stages": 4', '"num_stages": 3')
    step("resident: v9 after clone + edit (num_stages 4 -> 3)", [*prof, str(out / "w"), "v9"], warm, "v9")
    step("resident: v9 again", [*prof, str(out / "w"), "v9"], warm, "v9")
    started = time.monotonic()
    proc = subprocess.Popen(  # a benchmark's own client, interrupted on purpose
        [py, "-m", "kbench.kernel", "matmul", "--prof_type=annotation", "--out", str(out / "w")],
        env={**os.environ, "KBENCH_LOCK_CLOCKS": "0", **warm},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3.0)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=120)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    print(f"resident: matmul (annotation) interrupted after {sent - started:.1f} s: exit {proc.returncode} "
          f"{time.monotonic() - sent:.2f} s later; {last[:140]}")  # fmt: skip
    step("resident: v2 after the interrupt (served)", [*prof, str(out / "w"), "v2"], warm, "v2")
    timed([py, "-m", "kbench.kernel", "--resident-stop"], out / "warm.log", warm)
    mcp_loop(out, env)


def mcp_loop(out: Path, env: dict[str, str]) -> None:
    """The same loop through `kbench mcp` (scripts/mcp-edit-loop.py: the official SDK's stdio client, one server
    process): its steps' wall seconds and the num_stages each report shows."""
    import json

    script = Path(__file__).resolve().parents[2] / "scripts" / "mcp-edit-loop.py"
    root = str(script.parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    log = out / "mcp.log"
    timed([sys.executable, str(script), str(out / "mcp")], log, {**env, "PYTHONPATH": path})
    print("warm loop through MCP (one server process; the same xstages package)")
    results = out / "mcp" / "results.json"
    if not results.exists():
        print(f"  no results: see {log}")
        return
    for r in json.loads(results.read_text()):
        stages = f"   num_stages in its report {r['num_stages']}" if r.get("num_stages") else ""
        print(f"{'mcp: ' + r['step']:<58}{r['wall_s']:>7.2f} s{stages}")


def _listed(flag: str, default: list[str]) -> list[str]:
    """A ``--flag=a,b`` argument's names, or ``default``."""
    given = next((a.split("=", 1)[1] for a in sys.argv if a.startswith(f"{flag}=")), None)
    return given.split(",") if given else default


def _capture(out: Path, plan: str) -> str:
    """Event mode's last capture of ``plan``: the report's own account of where its capture phase went."""
    reports = sorted((out / "p" / "event" / plan).rglob("report.md"))
    line = next((x for x in reports[-1].read_text().splitlines() if "Where the capture" in x), "") if reports else ""
    return line.removeprefix("- ") or "no capture account in the last event report"


def main() -> None:
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        env: dict[str, str] = {}
        if sys.flags.dont_write_bytecode:
            env.update(PYTHONDONTWRITEBYTECODE="", PYTHONPYCACHEPREFIX=str(out / "pycache"))
            print(f"bytecode: cached under {out / 'pycache'} (this environment had PYTHONDONTWRITEBYTECODE set)")
        if "--warm" in sys.argv:  # the edit loop through the CLI and the resident kbench alone
            warm_loop(out, env)
            return
        env["KBENCH_RESIDENT"] = "0"  # kbench analyze rounds and each mode's rows: fresh processes
        reps = [Path(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--analyze=")]
        if reps:  # `kbench analyze` alone, on given captures: --analyze=REP (repeatable), --rounds=N
            count = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--rounds=")), ANALYZE_RUNS)
            for rep in reps:
                print(f"{rep.name[:40]:<40}{'analyze':<12}{analyze_rounds(rep.resolve(), out, env, count)}")
            return
        plans = _listed("--plans", PLANS)
        modes = _listed("--modes", MODES)
        count = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--runs=")), MODE_RUNS)
        print(f"{'plan':<12}{'mode':<12}{'wall s':>8}{'x event':>9}")
        for plan in plans:
            out_p = str(out / "p")
            argvs = {mode: [py, "-m", "kbench.kernel", plan, f"--prof_type={mode}", "--out", out_p] for mode in modes}
            for mode in modes:
                timed(argvs[mode], out / "warm.log", env)  # caches warm: what a user's second run costs
            runs: dict[str, list[float]] = {mode: [] for mode in modes}
            for _ in range(count):
                for mode in modes:
                    runs[mode].append(timed(argvs[mode], out / f"{plan}-{mode}.log", env))
            walls = {mode: statistics.median(r) for mode, r in runs.items()}
            for mode in modes:
                spread = f"{min(runs[mode]):.2f}-{max(runs[mode]):.2f}"
                base = walls.get("event")
                ratio = f"{walls[mode] / base:>9.2f}" if base else f"{'n/a':>9}"
                print(f"{plan:<12}{mode:<12}{walls[mode]:>8.2f}{ratio}   ({spread})")
            if "event" in walls and "annotation" in walls:
                print(f"{plan}: event / annotation = {walls['event'] / walls['annotation']:.2f}; {_capture(out, plan)}")
            if "annotation" in modes:
                rep = sorted((out / "p" / "annotation" / plan).rglob("profile.ncu-rep"))[-1]
                print(f"{plan:<12}{'analyze':<12}{analyze_rounds(rep, out, env, ANALYZE_RUNS)}")


if __name__ == "__main__":
    main()
