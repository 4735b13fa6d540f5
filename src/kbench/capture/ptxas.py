"""ptxas's messages on a compiled kernel's PTX (``ptxas -v``: registers, spills and its performance advisories, such as
wgmma serialized for lack of registers), kept as compiled/<stage>/ptxas.txt for the analysis (kbench.analysis.ptxas).
Triton ran ptxas already but keeps none of its messages. Where ptxas is not found, fails or times out, nothing is
written for that kernel and the analysis goes without."""

from __future__ import annotations

import hashlib
import logging
import re
import tempfile
from importlib.util import find_spec
from pathlib import Path

from kbench.capture import tools

log = logging.getLogger(__name__)
TIMEOUT_S = 120.0  # one kernel takes 0.3-6 s (mla_decode's fused kernels on a 2-core machine)
FILE = "ptxas.txt"
_TARGET = re.compile(r"^[ \t]*\.target[ \t]+(sm_\d+[af]?)\b", re.MULTILINE)  # the PTX's own architecture


def _bundled() -> list[Path]:
    """The ptxas Triton ships and compiles with (triton/backends/nvidia/bin), where Triton is installed."""
    spec = find_spec("triton")
    roots = list(spec.submodule_search_locations or []) if spec else []
    return [Path(r) / "backends" / "nvidia" / "bin" / "ptxas" for r in roots]


def find() -> Path | None:
    """ptxas: $KBENCH_PTXAS, PATH, $CUDA_HOME/bin, then Triton's own copy."""
    try:
        return tools.lookup("ptxas", "KBENCH_PTXAS", _bundled)
    except tools.ToolMissing as e:  # a KBENCH_PTXAS that is not an executable: said, and the analysis goes without
        log.warning("%s", e)
        return None


def messages(ptx: Path, tool: Path | None) -> str | None:
    """ptxas's ``-v`` messages on ``ptx`` for the architecture the PTX targets (wgmma needs sm_90a: an sm_90 target is
    assembled as such); where ``tool`` fails, Triton's own ptxas (a toolkit's older ptxas refuses a newer Triton's
    PTX version); None where there is no tool, no target or every one fails."""
    if tool is None or not ptx.is_file():
        return None
    target = _TARGET.search(ptx.read_text(errors="replace"))
    if target is None:
        return None
    arch = target[1] + ("a" if target[1] == "sm_90" else "")
    text = ptx.read_bytes()
    key = (hashlib.sha256(text).hexdigest(), str(tool), arch)
    if key in _SAID:  # a resident process asks again for the kernel it compiled last time: ptxas ran once
        return _SAID[key]
    tried = [tool, *(t for t in _bundled() if t != tool and t.is_file())]
    said = next((out for t in tried if (out := _run(t, arch, ptx)) is not None), None)
    if said is not None:  # a failure is tried again next time (a tool put right in between)
        _SAID[key] = said
        while len(_SAID) > MEMO:
            _SAID.pop(next(iter(_SAID)))
    return said


MEMO = 256  # kernels whose messages a process keeps (the oldest go first)
_SAID: dict[tuple[str, str, str], str] = {}  # (sha256 of the PTX, ptxas, arch) -> its messages


def _run(tool: Path, arch: str, ptx: Path) -> str | None:
    """One ptxas's ``-v`` messages on ``ptx`` for ``arch``; None where it fails."""
    with tempfile.TemporaryDirectory(prefix="kbench-ptxas-") as tmp:  # the cubin it writes is not kept: Triton's is
        argv = [str(tool), f"-arch={arch}", "-v", "-warn-spills", "-o", str(Path(tmp) / "out.cubin"), str(ptx)]
        try:
            done = tools.output(argv, timeout_s=TIMEOUT_S)
        except tools.ToolMissing as e:
            log.warning("no ptxas messages for %s: %s", ptx.name, e)
            return None
    if done.returncode != 0:
        log.warning("no ptxas messages for %s: ptxas exited %d", ptx.name, done.returncode)
        return None
    return done.log


def keep(folder: Path, kernels: list[str], tool: Path | None) -> dict[str, str]:
    """Run ptxas on each kernel's compiled/<stage>/<kernel>.ptx and write their messages to compiled/<stage>/ptxas.txt
    (each kernel's under a line naming it); the messages by kernel."""
    said = {k: text for k in kernels if (text := messages(folder / f"{k}.ptx", tool)) is not None}
    if said:
        (folder / FILE).write_text("".join(f"# ptxas -v on {k}.ptx\n{text}" for k, text in said.items()))
    return said
