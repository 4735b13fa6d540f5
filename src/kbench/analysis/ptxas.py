"""What ptxas said of a compiled kernel (compiled/<stage>/ptxas.txt, its ``-v`` messages) and what its SASS shows
(compiled/<stage>/<kernel>.sass): whether its warpgroup MMAs were serialized. Pure.

ptxas serializes a kernel's ``wgmma.mma_async`` instructions where its registers cannot hold the pipeline's
accumulators and operands, and says so as a performance advisory, e.g. "(C7512) Potential Performance Loss:
wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma pipeline in the
function 'k'" (the number differs between ptxas releases: C7511 in CUDA 13.0's). The machine code then waits for each
HGMMA (``WARPGROUP.DEPBAR.LE gsb0, 0x0``) before it issues the next one.
"""

from __future__ import annotations

import re

from kbench.model import Model

# a serialization advisory: its number and the rest of its line (why, and the function it names); no pattern that
# backtracks over a line's blanks (ptxas.txt is read back from a run folder: quadratic on a hostile one)
_ADVISORY = re.compile(
    r"\((C\d+)\)[ \t]*Potential Performance Loss:[ \t]*wgmma\.mma_async instructions are serialized due to ([^\n]*)"
)
_IN_FUNCTION = " in the function '"
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
REGISTERS = "insufficient register resources"  # the advisory's words for the register case
_HGMMA = re.compile(r"\bHGMMA\.")
_DRAINED = re.compile(r"\bWARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x0\b")  # wait until no HGMMA is in flight


class Serialized(Model):
    """ptxas's advisory that a kernel's warpgroup MMAs are serialized."""

    code: str  # its number as ptxas printed it (C7512, C7511, ...)
    reason: str  # "insufficient register resources for the wgmma pipeline", ...
    message: str  # the line as ptxas wrote it, from "(C...)" on

    @property
    def registers(self) -> bool:
        return self.reason.startswith(REGISTERS)


def serialized(ptxas_text: str, kernel: str | None = None) -> Serialized | None:
    """ptxas's serialization advisory for ``kernel`` (any function where None or where the advisory names none);
    None where it gave none."""
    for m in _ADVISORY.finditer(ptxas_text):
        reason, function = _function(m[2].rstrip())
        if kernel is None or function is None or function == kernel:
            return Serialized(code=m[1], reason=reason.strip(), message=m[0].strip())
    return None


def _function(rest: str) -> tuple[str, str | None]:
    """An advisory's reason and the function it names last ("... in the function 'k'"), or None where it names none."""
    reason, said, function = rest.rpartition(_IN_FUNCTION)
    if not said or not function.endswith("'") or "'" in function[:-1] or not function[:-1]:
        return rest, None
    return reason, function[:-1]


def compiled_functions(ptxas_text: str) -> list[str]:
    """The entry functions ptxas compiled (its ``-v`` lines)."""
    return _ENTRY.findall(ptxas_text)


def drained_hgmmas(sass_text: str) -> tuple[int, int] | None:
    """(HGMMAs followed by a wait for every HGMMA in flight before the next HGMMA, HGMMAs) in a SASS listing; None
    where it holds no HGMMA. A pipelined kernel issues several HGMMAs before it waits; a serialized one waits after
    each."""
    total = drained = 0
    pending = False  # an HGMMA seen and no drain since
    for line in sass_text.splitlines():
        if _HGMMA.search(line):
            total += 1
            pending = True
        elif pending and _DRAINED.search(line):
            drained += 1
            pending = False
    return (drained, total) if total else None


def facts(ptxas_text: str | None, sass_text: str | None, kernel: str | None) -> dict[str, object]:
    """The tiling record's facts: ptxas's serialization advisory for ``kernel`` and the SASS's drained HGMMAs (None
    each where that output is not at hand)."""
    found = serialized(ptxas_text, kernel) if ptxas_text is not None else None
    drained = drained_hgmmas(sass_text) if sass_text is not None else None
    return {
        "wgmma_serialized": found.model_dump(mode="json") if found else None,
        "hgmma_drained": list(drained) if drained else None,
    }
