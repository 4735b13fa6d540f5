"""Shared by the commands: plan arguments (`<pkg> [<version>] --name=value ...`), errors as one line, progress.

Nothing here imports typer or click: `kbench analyze` (kbench.cli.analyze) runs without them.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from kbench.errors import KbenchError, Terminated, UsageError, bad_name, refused_write

log = logging.getLogger("kbench")


@dataclass
class PlanArgs:
    package: str | None = None
    version: str | None = None
    values: dict[str, str] = field(default_factory=dict)


def parse_plan_args(tokens: list[str]) -> PlanArgs:
    """Split the free tokens into package, optional version and ``--name=value`` plan parameters."""
    out = PlanArgs()
    for tok in tokens:
        if tok.startswith("-"):
            name, eq, value = tok.lstrip("-").partition("=")
            if not eq or not name:
                raise UsageError(f"unknown option {tok}; plan parameters are written --name=value (see --list)")
            key = name.replace("-", "_")
            if key in out.values:
                raise UsageError(f"--{name} is given twice ({out.values[key]} and {value}); give it once")
            out.values[key] = value
        elif out.package is None:
            out.package = tok
        elif out.version is None:
            out.version = tok
        else:
            raise UsageError(f"unexpected argument '{tok}'; usage: <kernel_package> [<version>] --name=value ...")
    return out


def out_folder(value: str) -> Path:
    """An --out value: a folder name, never empty (an empty one would write into the current directory)."""
    if not value.strip():
        raise UsageError("--out is empty; name the output folder (default out/profiles)")
    return Path(value)


def fail(message: str, code: int) -> NoReturn:
    """One line on stderr, whatever the message held, and the exit code."""
    first = (message.strip().splitlines() or ["(no message)"])[0]
    print(f"kbench: error: {first}", file=sys.stderr, flush=True)
    sys.exit(code)


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="kbench: %(message)s", stream=sys.stderr, force=True
    )


def run_command(cmd: Any, argv: list[str] | None, prog: str) -> NoReturn:
    """Run a click command; every error ends as one line on stderr and a non-zero exit code."""
    with errors_exit(prog):
        code = cmd.main(args=argv, prog_name=prog, standalone_mode=False)
    sys.exit(code if isinstance(code, int) else 0)


@contextmanager
def errors_exit(prog: str) -> Iterator[None]:
    """Run the block as a command: SIGINT/SIGTERM/SIGHUP anywhere, and every error, end as one line on stderr
    and the exit code (``kbench analyze`` without click, and every click command through ``run_command``)."""
    from kbench.signals import terminate_raises

    try:
        with terminate_raises(interrupt=True):
            yield
    except KeyboardInterrupt:
        fail(
            "interrupted (Ctrl-C); earlier profiles are untouched and this run's folder, if any, is marked interrupted",
            130,
        )
    except Terminated as e:
        fail(
            f"{e}; clocks kbench locked were reset, and this run's folder, if any, is marked interrupted",
            128 + e.signum,
        )
    except KbenchError as e:
        fail(str(e), e.exit_code)
    except OSError as e:
        if (bad := bad_name(e)) is not None:
            fail(str(bad), bad.exit_code)
        if (refused := refused_write(e)) is None:
            internal(e)
        fail(f"{refused}; earlier profiles are untouched, this run's folder is marked failed", refused.exit_code)
    except Exception as e:
        # click's own errors (typer vendors click in recent releases, so they are matched by shape)
        if type(e).__name__ == "NoArgsIsHelpError":  # `kbench` alone: the help, not an error line
            print(e.format_message(), file=sys.stderr, flush=True)  # type: ignore[attr-defined]
            sys.exit(2)
        if type(e).__name__ == "Abort":
            fail("interrupted", 130)
        code = getattr(e, "exit_code", None)
        if hasattr(e, "format_message") and isinstance(code, int):
            fail(f"{e.format_message()} (see {prog} --help)", code or 1)
        if (bad := bad_name(e)) is not None:
            fail(str(bad), bad.exit_code)
        internal(e)


def internal(e: Exception) -> NoReturn:
    """A bug in kbench: exit 70 with one line (the traceback with KBENCH_DEBUG=1)."""
    if os.environ.get("KBENCH_DEBUG"):
        raise e
    fail(f"internal error: {type(e).__name__}: {e} (set KBENCH_DEBUG=1 for the traceback)", 70)


@contextmanager
def progress(enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A rich spinner on stderr that the API's progress callback updates; plain log lines when not a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield lambda msg: print(f"kbench: {msg}", file=sys.stderr, flush=True)
        return
    from rich.console import Console

    with Console(stderr=True).status("kbench: starting") as status:
        yield lambda msg: status.update(f"kbench: {msg}")


# Option names of the profile command: a plan parameter with one of these names could never be set.
RESERVED = {
    "prof_type",
    "list",
    "predict",
    "device",
    "out",
    "bench_runs",
    "check",
    "no_check",
    "cuda_graph",
    "no_cuda_graph",
    "baseline",
    "kernel_path",
    "timeout",
    "timeline_backend",
    "lock_clocks",
    "no_lock_clocks",
    "no_wait",
    "verbose",
    "help",
}


def load_plan(args: PlanArgs, kernel_path: list[str], values: dict[str, Any] | None = None) -> Any:
    """Validate package, version and parameters into a plan instance (no GPU touched)."""
    from kbench.plan.discovery import load_version

    if args.package is None:
        raise UsageError("name a kernel package, e.g. `vector_add` (`kbench list` shows them all)")
    cls = load_version(args.package, args.version, kernel_path)
    clash = sorted(RESERVED & {p.name for p in cls.params()})
    if clash:
        raise UsageError(
            f"{args.package} declares parameter(s) {', '.join(clash)}, which kbench's own options use; "
            "rename them in the plan"
        )
    return cls.from_values(values if values is not None else dict(args.values))
