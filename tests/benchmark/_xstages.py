"""The edit loop's user package, `xstages` (kbench's Triton matmul at one tiling, num_stages=4), shared by
scripts/mcp-edit-loop.py (through MCP) and bench_turnaround's warm loop (through the CLI)."""

from __future__ import annotations

import os
from pathlib import Path

V2 = '''"""xstages v2: kbench's Triton matmul at one tiling."""

from typing import ClassVar

from kbench.kernel.matmul._triton import TritonMatmul
from kbench.plan.base import Config


class XstagesV2(TritonMatmul):
    """C = A @ B at one fixed tiling."""

    TUNING: ClassVar[list[Config]] = [
        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}
    ]


PLAN = XstagesV2
'''


def package(work: Path) -> Path:
    pkg = work / "kp" / "xstages"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text('"""xstages: the edit loop\'s package."""\n')
    (pkg / "v2.py").write_text(V2)
    (pkg / "v9.py").unlink(missing_ok=True)
    return work / "kp"


def edit_keeping_stat(path: Path, old: str, new: str) -> None:
    text, st = path.read_text(), path.stat()
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
