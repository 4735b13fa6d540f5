"""The `kbench` console script and `python -m kbench`: `kbench analyze ...` runs without typer or click
(kbench.cli.analyze; a fresh analysis would spend more time importing and running the command framework than
analysing), every other command, `kbench --help` included, is the typer app's (kbench.cli.app)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["analyze"]:
        from kbench.cli import analyze

        analyze.main(args[1:])
    from kbench.cli import app

    app.main(args)
