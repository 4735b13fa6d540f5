"""The working folder off the import path of kbench's `python -m` entry points (python -m kbench, python -m
kbench.kernel, the resident): `python -m` puts it first on sys.path, so a typer.py, torch.py or json.py planted there
would be imported in place of the real one. Only os and sys are imported here, both loaded before any module runs;
kbench imports user kernel packages by their files (--kernel-path), never from sys.path."""

import os
import sys


def without_working_folder(path: list[str], start: str, safe_path: bool) -> list[str]:
    """``path`` without the entry `python -m` puts first, the working folder (``start``, or ''): what `python -P`
    (``safe_path``) leaves out already."""
    return path[1:] if not safe_path and path[:1] in ([start], [""]) else path


def leave() -> None:
    """Take the working folder off sys.path: the first thing an entry point does, before any other import."""
    here = os.getcwd()  # noqa: PTH109 - pathlib is not loaded yet, and could be the planted one
    sys.path[:] = without_working_folder(sys.path, here, bool(sys.flags.safe_path))
