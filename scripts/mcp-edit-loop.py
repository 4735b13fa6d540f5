#!/usr/bin/env python3
"""The agent's edit loop through `kbench mcp`, driven by the official MCP SDK's stdio client, on a CUDA machine.

A user package `xstages` (kbench's Triton matmul at one tiling, num_stages=4) is written to WORK/kp; then, in one
server process: profile v2 twice (event mode), clone v2 to v9, edit v9 to num_stages=3 (same size, its mtime put
back: what a .pyc's check would miss), profile v9 twice, profile v9 in annotation mode (the plan runs in a child
under ncu), compare the v2 and v9 runs; and in a fresh server, profile v9 again (what a new process measures).
Each profile's report must show the tiling that is on disk. Prints one row per step and writes WORK/results.json.

Usage: PYTHONPATH=. python scripts/mcp-edit-loop.py [WORK]   (default out/mcp-edit-loop; clocks are left alone)
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from tests.benchmark._xstages import edit_keeping_stat, package


def row(step: str, wall: float, answer: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"step": step, "wall_s": round(wall, 2)}
    if answer and "report" in answer:
        rep = answer["report"]
        stages = {s["name"]: s["duration_us"]["value"] for s in rep["stages"]}
        found = re.search(r"num_stages=(\d+)", answer["report_md"])
        source = rep["environment"]["source"] or {}
        out.update(
            run=answer["run"],
            version=rep["version"],
            mode=rep["mode"],
            num_stages=int(found.group(1)) if found else None,
            duration_us=stages,
            digest=source.get("digest"),
            source_note=source.get("note"),
            baseline_code=rep.get("baseline_code"),
            clocks=rep["environment"]["clocks"],
        )
    elif answer:
        out["answer"] = answer
    return out


Step = tuple[str, str, dict[str, Any]]  # label, tool (or "edit"), arguments


async def session(work: Path, kp: Path, steps: list[Step], rows: list[dict[str, Any]]) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbench", "mcp", "--kernel-path", str(kp)],
        cwd=str(work),
        env={**os.environ, "KBENCH_LOCK_CLOCKS": "0"},
    )
    with (work / "server.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for label, tool, args in steps:
                if tool == "edit":
                    edit_keeping_stat(kp / "xstages" / "v9.py", '"num_stages": 4', '"num_stages": 3')
                    rows.append({"step": label, "wall_s": 0.0})
                    continue
                if tool == "compare":
                    args = {"a": rows[args["a"]]["run"], "b": rows[args["b"]]["run"]}
                started = time.perf_counter()
                r = await s.call_tool(tool, args)
                wall = time.perf_counter() - started
                if r.is_error:
                    raise SystemExit(f"{label}: {r.content[0].text}")  # type: ignore[union-attr]
                rows.append(row(label, wall, r.structured_content))
                print(json.dumps(rows[-1]), flush=True)


def main() -> None:
    work = Path(sys.argv[1] if len(sys.argv) > 1 else "out/mcp-edit-loop").resolve()
    work.mkdir(parents=True, exist_ok=True)
    kp = package(work)
    out = str(work / "profiles")
    ev = {"kernel": "xstages", "mode": "event", "out": out}
    rows: list[dict[str, Any]] = []
    one = [
        ("1 profile v2 (event)", "profile", {**ev, "version": "v2"}),
        ("2 profile v2 again", "profile", {**ev, "version": "v2"}),
        ("3 clone v2 -> v9", "clone_version", {"kernel": "xstages", "source": "v2", "target": "v9"}),
        ("4 edit v9: num_stages 4 -> 3, size and mtime kept", "edit", {}),
        ("5 profile v9 (event)", "profile", {**ev, "version": "v9"}),
        ("6 profile v9 again", "profile", {**ev, "version": "v9"}),
        ("7 profile v9 (annotation: a child under ncu)", "profile", {**ev, "version": "v9", "mode": "annotation"}),
        ("8 compare the v2 and v9 event runs", "compare", {"a": 0, "b": 4}),
    ]
    anyio.run(session, work, kp, one, rows)
    fresh = [("9 a fresh server: profile v9 (event)", "profile", {**ev, "version": "v9"})]
    anyio.run(session, work, kp, fresh, rows)
    (work / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    expected = {0: 4, 1: 4, 4: 3, 5: 3, 6: 3, 8: 3}
    wrong = {rows[i]["step"]: rows[i].get("num_stages") for i, n in expected.items() if rows[i].get("num_stages") != n}
    print("every report shows the tiling on disk" if not wrong else f"WRONG tiling in: {wrong}")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
