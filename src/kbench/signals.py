"""SIGTERM and SIGHUP as an exception, so that every cleanup (the clock reset, the run folder's mark, a child's
process group) runs as it does on Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from kbench.errors import Terminated


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into Terminated for the block (main thread only; elsewhere signals stay as they
    are). Nested blocks are harmless: each restores what it found."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: object) -> None:
        raise Terminated(f"terminated by {signal.Signals(signum).name}", signum)

    old = {s: signal.signal(s, raise_terminated) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
