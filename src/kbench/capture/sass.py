"""The SASS of a compiled kernel with its source lines (``nvdisasm -g -c`` of the cubin), written beside the PTX as
compiled/<stage>/<kernel>.sass, where nvdisasm is found: event mode's static per-line mix then counts the machine
instructions ptxas emitted (analysis.lines.compiled), not the PTX. Where it is not found or fails, nothing is
written and the PTX stands in (said in lines/<stage>.md)."""

from __future__ import annotations

import logging
from pathlib import Path

from kbench.capture import tools

log = logging.getLogger(__name__)
TIMEOUT_S = 30.0  # one cubin takes well under a second


def nvdisasm() -> Path | None:
    """nvdisasm: $KBENCH_NVDISASM, PATH, then $CUDA_HOME/bin (it ships with the CUDA toolkit, not the driver)."""
    try:
        return tools.lookup("nvdisasm", "KBENCH_NVDISASM")
    except tools.ToolMissing as e:  # a KBENCH_NVDISASM that is not an executable: said, and the PTX stands in
        log.warning("%s", e)
        return None


def disassemble(cubin: Path, tool: Path | None) -> Path | None:
    """Write <cubin>.sass (nvdisasm -g -c: code sections with their source lines); its path, or None."""
    if tool is None or not cubin.is_file():
        return None
    try:
        done = tools.output([str(tool), "-g", "-c", str(cubin)], timeout_s=TIMEOUT_S)
    except tools.ToolMissing as e:
        log.warning("no SASS for %s: %s", cubin.name, e)
        return None
    if done.returncode != 0 or "//## File" not in done.log:
        log.warning("no SASS for %s: nvdisasm exited %d", cubin.name, done.returncode)
        return None
    target = cubin.with_suffix(".sass")
    target.write_text(done.log)
    return target
