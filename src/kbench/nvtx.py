"""The NVTX naming protocol between the child process that runs a plan under a profiler and the analyses that
read its captures. Pure names; nothing here imports torch.

- ``kbench.<stage>``: a stage's launches (ncu's ``--nvtx-include`` filter; the timeline's stages);
- ``kbench:iteration``: one timed iteration of the whole plan (timeline captures);
- ``kbench:alone:<stage>``: a concurrent plan's stage run by itself (timeline captures).

Stage names never contain '/', which ncu reads as nesting.
"""

from __future__ import annotations

import re

STAGE = "kbench."
ITERATION = "kbench:iteration"
ALONE = "kbench:alone:"

_STAGE_RANGE = re.compile(r"^kbench\.(?P<stage>[A-Za-z0-9_.:-]+)$")


def stage_range(stage: str) -> str:
    """The range around a stage's launches."""
    return STAGE + stage


def alone_range(stage: str) -> str:
    """The range around a concurrent plan's stage run by itself."""
    return ALONE + stage


def stage_of(range_name: str) -> str | None:
    """The stage a range name marks (``kbench.<stage>``), or None for any other range."""
    m = _STAGE_RANGE.match(range_name)
    return m.group("stage") if m else None
