"""ragged chunked: equal 8192-element chunks, each added to its segment's total with one atomic per program."""

from __future__ import annotations

from typing import ClassVar

from ._common import Ragged


class Chunked(Ragged):
    """equal chunks."""

    CHUNKED: ClassVar[bool] = True


PLAN = Chunked
