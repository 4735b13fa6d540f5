"""SIGTERM and SIGHUP as an exception, so that every cleanup (the clock reset, the run folder's mark, a child's
process group) runs as it does on Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from kbench.errors import Terminated


@contextlib.contextmanager
def terminate_raises(interrupt: bool = False) -> Iterator[None]:
    """Turn SIGTERM and SIGHUP (and SIGINT when ``interrupt``: the CLI, where the command framework would swallow
    a KeyboardInterrupt into a silent exit) into Terminated for the block (main thread only; elsewhere signals stay
    as they are). Nested blocks are harmless: each restores what it found."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: object) -> None:
        if signum == signal.SIGINT:
            raise Terminated("interrupted (Ctrl-C)", signum)
        raise Terminated(f"terminated by {signal.Signals(signum).name}", signum)

    wanted = (signal.SIGTERM, signal.SIGHUP, *((signal.SIGINT,) if interrupt else ()))
    old = {s: signal.signal(s, raise_terminated) for s in wanted}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
