"""What a tool leaves behind, ended: its process group and the processes it starts in sessions of their own (found
by a marker in their command line). kbench ends them itself on a timeout, an error or a signal it can catch
(capture.tools); this program ends them when kbench cannot: killed by SIGKILL or the OOM killer, it would leave
ncu or nsys, and the plan's child under them, running on the GPU after its lock is released.

`python -S reaper.py` runs beside every tool kbench starts, in a session of its own (out of reach of a signal to
kbench's group), reading one line per started tool on stdin: ``[pid, [marker, ...]]``. Its stdin is a pipe whose
only writer is kbench: end of file means kbench is gone, and the reaper kills every group and stray it was told of,
then exits. When the tools end normally kbench kills the reaper first. Standard library only (it runs without
site-packages, started in a few milliseconds); Linux-specific parts (/proc) do nothing elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path


def matching_processes(markers: list[str], proc_root: Path = Path("/proc")) -> list[int]:
    """The ids of this user's processes (not this one) whose command line holds one of ``markers`` whole (not as the
    start of a longer word: profile-123 is not in profile-1234), in order; none where there is no /proc to read.
    Another user's process is never one (a reaper of root's kbench must not end a stranger's nsys)."""
    if not markers:
        return []
    found = []
    for entry in proc_root.glob("[0-9]*"):
        try:
            if entry.stat().st_uid != os.geteuid():
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if int(entry.name) != os.getpid() and any(_holds(cmdline, m) for m in markers):
            found.append(int(entry.name))
    return sorted(found)


def _holds(cmdline: str, marker: str) -> bool:
    """Whether ``marker`` occurs in ``cmdline`` not followed by a letter or digit."""
    at = cmdline.find(marker)
    while at >= 0:
        after = cmdline[at + len(marker) : at + len(marker) + 1]
        if not after.isalnum():
            return True
        at = cmdline.find(marker, at + 1)
    return False


def end(group: int, markers: list[str]) -> None:
    """SIGKILL to a process group (its leader's pid) and to every process whose command line holds a marker."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(group, signal.SIGKILL)
    for pid in matching_processes(markers):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def main() -> None:
    started: list[tuple[int, list[str]]] = []
    for line in sys.stdin:  # until kbench's end of the pipe closes
        with contextlib.suppress(ValueError, TypeError):
            pid, markers = json.loads(line)
            started.append((int(pid), [str(m) for m in markers]))
    for pid, markers in started:
        end(pid, markers)


if __name__ == "__main__":
    main()
