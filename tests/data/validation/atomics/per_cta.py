"""atomics per_cta: each CTA sums its 1024-element tile on chip (tl.sum) and adds it to out[0] with one atomic:
16384 atomics in all; the fixed twin of per_element."""

from __future__ import annotations

from typing import ClassVar

from ._common import AtomicSum


class PerCta(AtomicSum):
    """one atomic add per CTA."""

    PER_CTA: ClassVar[bool] = True


PLAN = PerCta
