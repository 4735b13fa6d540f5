"""Where a capture's wall time goes: named phases timed on the host clock, and the line a report shows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Stopwatch:
    """Seconds spent per phase (a phase entered twice adds up), in the order phases were first entered."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - start


def describe(seconds: dict[str, float]) -> str:
    """'Where the capture's 31.2 s went: compiling ... 25.1 s (80%), ...', largest first."""
    total = sum(seconds.values())
    parts = [
        f"{name} {s:.1f} s ({100 * s / total:.0f}%)" if total else f"{name} {s:.1f} s"
        for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])
    ]
    return f"Where the capture's {total:.1f} s went: {', '.join(parts)}"
