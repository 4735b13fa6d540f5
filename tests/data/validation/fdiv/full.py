"""fdiv full: ``acc += x / d``, Triton's default fp32 division: div.full.f32 (2 ulp) in the PTX, in SASS per term
MUFU.RCP with range scaling (two FSETP, an FSEL, four FMULs) and no FCHK or branch: 88 SASS instructions in the loop
for 8 terms a thread, 8 MUFU.RCP. Still one special-function op per term."""

from __future__ import annotations

from typing import ClassVar

from ._common import RatioSum


class Full(RatioSum):
    """div.full.f32 per term."""

    DIV: ClassVar[str] = "full"


PLAN = Full
