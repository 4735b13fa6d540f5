"""The SASS of a compiled kernel with its source lines (``nvdisasm -g -c`` of the cubin), written beside the PTX as
compiled/<stage>/<kernel>.sass, where nvdisasm is found: event mode's static per-line mix then counts the machine
instructions ptxas emitted (analysis.lines.compiled), not the PTX. Where it is not found or fails, nothing is
written and the PTX stands in (said in lines/<stage>.md)."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from kbench.capture import tools

log = logging.getLogger(__name__)
TIMEOUT_S = 30.0  # one cubin takes well under a second


# the listings this process made, by nvdisasm and the cubin's sha256: a long-lived process (the resident, MCP) that
# profiles the same kernel again writes its listing without running nvdisasm (0.1-0.3 s a kernel on the H100)
_LISTED: dict[tuple[str, str], str] = {}
LISTED_MAX = 32


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
    target = cubin.with_suffix(".sass")
    key = (str(tool), hashlib.sha256(cubin.read_bytes()).hexdigest())
    if key in _LISTED:  # the same machine code listed before in this process (the resident's edit loop)
        target.write_text(_LISTED[key])
        return target
    try:
        done = tools.output([str(tool), "-g", "-c", str(cubin)], timeout_s=TIMEOUT_S)
    except tools.ToolMissing as e:
        log.warning("no SASS for %s: %s", cubin.name, e)
        return None
    if done.returncode != 0 or "//## File" not in done.log:
        log.warning("no SASS for %s: nvdisasm exited %d", cubin.name, done.returncode)
        return None
    if len(_LISTED) >= LISTED_MAX:
        _LISTED.pop(next(iter(_LISTED)))
    _LISTED[key] = done.log
    target.write_text(done.log)
    return target
