"""Work counted, not timed: the lines of Python a call executes in the modules named (each loop's every turn, each
comprehension's every element), through sys.settrace. The count of one input is the same on a quiet machine and a
busy one, so a test can hold an analysis to linear growth, and a budget stops a call that would run for hours (the
count passes it within a second) instead of waiting for it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


class WorkExceeded(Exception):
    """The call executed more lines than its budget."""


def lines_run(call: Callable[[], T], modules: tuple[ModuleType, ...], budget: int | None = None) -> tuple[T, int]:
    """``call()``'s result and the lines it executed in ``modules``; WorkExceeded once they pass ``budget``."""
    files = {m.__file__ for m in modules}
    count = 0

    def line(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
            if budget is not None and count > budget:
                raise WorkExceeded(f"past {budget:,} lines")
        return line

    def call_event(frame: FrameType, event: str, arg: Any) -> Any:
        return line if frame.f_code.co_filename in files else None

    before = sys.gettrace()
    sys.settrace(call_event)
    try:
        result = call()
    finally:
        sys.settrace(before)
    return result, count
