"""`kbench analyze <capture>`: the reports of a capture on disk, parsed and run without typer or click.

The console script (kbench.cli.entry) hands `kbench analyze ...` straight to ``main``, so that a fresh analysis
imports no command framework (typer and its parameter coercion cost more than the analysis; issue 12); the typer
app's `analyze` is a stub that forwards its raw arguments to ``command``, for `kbench --help` and in-process callers.
The arguments are read as click read them when this was a typer command: options anywhere, the first free token is
the capture, unknown options and further free tokens are kept in order (the plan's version and --name=value
parameters, which need --plan), short flags combine (-vh), and `--` ends the options.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from kbench.cli.common import errors_exit, load_plan, out_folder, parse_plan_args, setup_logging
from kbench.errors import UsageError

PROG = "kbench"
USAGE = f"{PROG} analyze [OPTIONS] CAPTURE [--plan <pkg> [<version>] [--<param>=<value> ...]]"
DOC = """Build the reports of an existing capture, without a GPU or the profiler installed.

An .ncu-rep gives the annotation or ncu reports; an nsys .sqlite export or a PyTorch-profiler .json trace
gives the nsys-mode timeline reports; a Proton .hatchet profile gives the proton-mode report (it needs --plan: its
scopes are the plan's stages). Without --plan each profiled kernel (ncu) or each kbench.<stage>
NVTX range (timeline; each kernel name when there is none) is a stage and the FLOP/byte model is n/a; with
`--plan <pkg> [<version>] --<param>=<value> ...` the stages are the plan's, found by their NVTX ranges
(kbench.<stage>), and compared with its analytic model. Without --plan, a capture lying in a kbench run folder is
analysed with the plan (and mode) its params.json names, where that plan loads here as typed (the report says so).
A timeline of a busy GPU without a plan cannot be classified: its tables, trace.json and timeline.md are written, no
report.md, and the exit is 1."""
CAPTURE = (
    "An Nsight Compute report (.ncu-rep), a timeline: an nsys SQLite export (.sqlite) or a "
    "PyTorch-profiler trace (.json), or a Proton profile (.hatchet)."
)


@dataclass(frozen=True)
class Option:
    """One option: its spellings, where its value goes, its help; ``metavar`` None makes it a flag."""

    names: tuple[str, ...]
    dest: str
    help: str
    metavar: str | None = None
    multiple: bool = False
    default: str | None = None


OPTIONS = (
    Option(
        ("--mode",),
        "mode",
        "For .ncu-rep: annotation (default; compact) or ncu (adds report-verbose.md, annotated source, SASS, "
        "and ranks Top 3 by ncu's rules). Timelines are always analysed as nsys mode.",
        "MODE",
    ),
    Option(("--out",), "out", "Root folder of the output.", "DIR", default="out/profiles"),
    Option(
        ("--plan",),
        "plan",
        "Kernel package whose stages and FLOP/byte model to use; its version and --<param>=<value> follow.",
        "PKG",
    ),
    Option(("--kernel-path",), "kernel_path", "Folder of your own kernel packages (repeatable).", "DIR", True),
    Option(("-v", "--verbose"), "verbose", "Log what kbench does."),
    Option(("-h", "--help"), "help", "Show this message and exit."),
)
BY_NAME = {name: o for o in OPTIONS for name in o.names}


@dataclass
class AnalyzeArgs:
    capture: Path | None = None
    mode: str | None = None
    out: str = "out/profiles"
    plan: str | None = None
    kernel_path: list[str] = field(default_factory=list)
    verbose: bool = False
    help: bool = False
    extra: list[str] = field(default_factory=list)  # the plan's version and --name=value parameters, in order


def _usage(message: str) -> UsageError:
    return UsageError(f"{message} (see {PROG} --help)")


def parse(argv: list[str]) -> AnalyzeArgs:
    """The arguments after `analyze`; a malformed option is a UsageError (exit 2). The capture may still be None
    when --help was asked for."""
    args = AnalyzeArgs()
    free: list[str] = []
    rest = list(argv)

    def take(o: Option, opt: str, explicit: str | None) -> None:
        if o.metavar is None:
            if explicit is not None:
                raise _usage(f"Option '{opt}' does not take a value.")
            setattr(args, o.dest, True)
            return
        if explicit is None:
            if not rest:
                raise _usage(f"Option '{opt}' requires an argument.")
            explicit = rest.pop(0)
        if o.multiple:
            getattr(args, o.dest).append(explicit)
        else:
            setattr(args, o.dest, explicit)

    while rest:
        tok = rest.pop(0)
        if tok == "--":
            free += rest
            break
        if not tok.startswith("-") or tok == "-":
            free.append(tok)
            continue
        name, eq, value = tok.partition("=")
        if name in BY_NAME and len(name) > 2:  # a long option, its value attached (--out=D) or next
            take(BY_NAME[name], name, value if eq else None)
        elif tok.startswith("--"):
            free.append(tok)  # not ours: a plan parameter
        else:  # short flags, combined (-vh); letters that are not ours stay together as one token
            unknown = ""
            for ch in tok[1:]:
                if f"-{ch}" in BY_NAME:
                    take(BY_NAME[f"-{ch}"], f"-{ch}", None)
                else:
                    unknown += ch
            if unknown:
                free.append(f"-{unknown}")
    if args.help:
        return args
    if not free:
        raise _usage("Missing argument 'capture'.")
    args.capture, args.extra = Path(free[0]), free[1:]
    return args


def help_text(width: int = 80) -> str:
    """`kbench analyze --help`: the usage, the description, the capture and every option with what it does."""
    import textwrap

    def label(o: Option) -> str:
        return ", ".join(o.names) + (f" {o.metavar}" if o.metavar else "")

    def text(o: Option) -> str:
        return o.help + (f"  [default: {o.default}]" if o.default is not None else "")

    sections = [("Arguments", [("CAPTURE", CAPTURE)]), ("Options", [(label(o), text(o)) for o in OPTIONS])]
    indent = max(len(name) for _, rows in sections for name, _ in rows) + 4
    lines = [f"Usage: {USAGE}", ""]
    for paragraph in DOC.split("\n\n"):
        lines += [*textwrap.wrap(paragraph.replace("\n", " "), width, initial_indent="  ", subsequent_indent="  "), ""]
    for title, rows in sections:
        lines.append(f"{title}:")
        for name, about in rows:
            first, *more = textwrap.wrap(about, width - indent)
            lines += [f"  {name:<{indent - 2}}{first}", *(" " * indent + m for m in more)]
        lines.append("")
    return "\n".join(lines)


def command(argv: list[str]) -> None:
    """Parse and run `kbench analyze`; errors are raised (KbenchError and the rest) for the caller to report."""
    args = parse(argv)
    if args.help:
        sys.stdout.write(help_text())
        sys.stdout.flush()
        return
    assert args.capture is not None
    setup_logging(args.verbose)
    from kbench import ncu_preload

    ncu_preload.start(args.capture)  # ncu_report's metric library loads on another core while the analysis imports
    from kbench import pipeline
    from kbench.modes import registry

    registry.for_capture(args.capture, args.mode)  # a capture or --mode it cannot read: refused before the plan
    if args.extra and args.plan is None:
        raise UsageError(f"unexpected argument(s) {' '.join(args.extra)}; plan parameters need --plan <pkg>")
    if args.kernel_path:
        from kbench.plan.discovery import kernel_paths

        kernel_paths(args.kernel_path)  # a folder typed that is not one: refused, also where no --plan needs it
    the_plan = load_plan(parse_plan_args([args.plan, *args.extra]), args.kernel_path) if args.plan else None
    result = pipeline.analyze(args.capture, args.mode, out_folder(args.out), the_plan, args.kernel_path)
    print(result.report_md, flush=True)
    print(f"kbench: wrote {Path(result.out_dir) / 'report.md'}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> NoReturn:
    """`kbench analyze ...` as its own command: every error one line on stderr and its exit code."""
    with errors_exit(PROG):
        command(sys.argv[2:] if argv is None else argv)
    sys.exit(0)
