"""The `kbench` console script and `python -m kbench`: `kbench analyze ...` runs without typer or click
(kbench.cli.analyze; a fresh analysis would spend more time importing and running the command framework than
analysing), every other command, `kbench --help` included, is the typer app's (kbench.cli.app)."""

from __future__ import annotations

import gc
import os
import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["analyze"]:
        # pydantic looks for plugins (entry points of the 'pydantic' group) the first time it builds a model: a scan
        # of every installed distribution's metadata, ~25 ms of an analysis on the H100 machine (209 of them). The
        # models built here are kbench's own, which no plugin is for; PYDANTIC_DISABLE_PLUGINS set by the user,
        # even empty (plugins on), is theirs to keep.
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
        from kbench.cli import analyze

        # A short command that ends its process: the cyclic collector's passes over what the imports build
        # (pydantic's schemas, typing's caches) and the interpreter's last pass over it at exit are ~0.1 s of an
        # analysis. Collect rarely while it runs and leave what exists at the end to the process's exit (objects
        # frozen are never collected; nothing kbench needs at exit lives in a reference cycle).
        thresholds = gc.get_threshold()
        gc.set_threshold(100_000, 50, 50)
        try:
            analyze.main(args[1:])
        finally:
            # Not with Triton loaded (a --plan imports its kernels): nanobind counts what a frozen collector keeps
            # alive at exit as leaks of libtriton's and prints 30+ lines of them after kbench's own (Triton 3.9)
            if "triton._C.libtriton" not in sys.modules:
                gc.freeze()
            gc.set_threshold(*thresholds)
    from kbench.cli import app

    app.main(args)
