"""The `kbench` command: profile, check, list."""

from __future__ import annotations

import sys
from typing import Any

import typer

from kbench.cli import kernel
from kbench.cli.common import load_plan, parse_plan_args, run_command, setup_logging

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="kbench profiles GPU kernel plans against the device roofline and writes a fixed-format report.md.",
)
app.command("profile", context_settings=kernel.CONTEXT, epilog=kernel.EPILOG, options_metavar=kernel.USAGE)(
    kernel.profile
)


@app.command("check", context_settings=kernel.CONTEXT)
def check_cmd(
    ctx: typer.Context,
    kernel_path: list[str] = typer.Option([], "--kernel-path", help="Folder of your own kernel packages."),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Check a plan's correctness: <kernel_package> [<version>] [--<param>=<value> ...].

    On a CUDA GPU at the given (default) sizes; without one, under Triton's CPU interpreter at the plan's
    small check sizes (a bf16 plan then runs in float16, and says so). Every tuning configuration is checked.
    """
    setup_logging(verbose)
    from kbench.runtime import check, gpu

    args = parse_plan_args(list(ctx.args))
    on_gpu = gpu.cuda_available()
    if not on_gpu:
        check.use_interpreter()
    note = ""
    plan = load_plan(args, kernel_path)  # validates the user's values as given
    if not on_gpu:
        values, note = check.cpu_values(type(plan), dict(args.values))
        plan = type(plan).from_values(values)
    where = "CUDA GPU" if on_gpu else check.INTERPRETER
    typer.echo(f"checking {plan.package} {plan.version} {plan.values()} on {where}{'; ' + note if note else ''}")
    results = check.check_plan(plan, "cuda" if on_gpu else "cpu", note)
    for r in results:
        typer.echo(f"  {r.stage} {r.config or '(default)'}: {r.result.verdict()}")
    failed = [r for r in results if not r.result.passed]
    if failed:
        typer.echo(f"kbench: error: {len(failed)} of {len(results)} configuration(s) failed the check", err=True)
        sys.exit(5)
    typer.echo(f"all {len(results)} configuration(s) pass")


@app.command("list")
def list_cmd(
    kernel_path: list[str] = typer.Option([], "--kernel-path", help="Folder of your own kernel packages."),
) -> None:
    """List kernel packages, their versions, parameters and defaults."""
    from kbench.cli.listing import print_listing

    print_listing(kernel_path)


def main(argv: list[str] | None = None) -> None:
    command: Any = typer.main.get_command(app)
    run_command(command, argv if argv is not None else sys.argv[1:], "kbench")
