"""`python -m kbench.kernel <kernel_package> [<version>] --<param>=<value> ... --prof_type=<mode>`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from kbench.cli.common import load_plan, out_folder, parse_plan_args, progress, run_command, setup_logging
from kbench.errors import UsageError
from kbench.modes import registry

EPILOG = (
    "Plan parameters come from the plan and are written --name=value (e.g. --n=1048576, --b=32 --s=16); "
    "--list shows every package, version, parameter and default. Modes (--prof_type; "
    + registry.DEFAULT
    + " is the default): "
    + "; ".join(f"{name}: {what}" for name, what in registry.SUMMARY.items())
    + "; disabled: run and check, no profiler. "
    "Output: <out>/<mode>/<kernel>/<params>/<timestamp>/report.md. On a machine with an NVIDIA driver the first "
    "call starts a resident kbench (one per user and GPU, gone after 15 idle minutes) that runs later calls warm; "
    "KBENCH_RESIDENT=0 turns it off, `python -m kbench.kernel --resident-stop` stops it."
)

USAGE = "<kernel_package> [<version>] [--<param>=<value> ...] [OPTIONS]"
CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": ["-h", "--help"]}


def profile(
    ctx: typer.Context,
    prof_type: str = typer.Option(
        registry.DEFAULT, "--prof_type", "--prof-type", help=" | ".join([*registry.SUMMARY, "disabled"])
    ),
    list_plans: bool = typer.Option(False, "--list", help="List kernel packages, versions, parameters and defaults."),
    predict: bool = typer.Option(False, "--predict", help="Print each stage's roofline lower bound; run nothing."),
    device: str | None = typer.Option(
        None,
        "--device",
        help="With --predict or --prof_type=access: the device to predict for, a key of conf/devices.json (default: "
        "this machine's GPU, else H100_SXM).",
    ),
    access_programs: int = typer.Option(
        64,
        "--access-programs",
        min=0,
        help="access mode: at most this many programs of each launch run under the interpreter (a sample of a larger "
        "grid, evenly spread, weighted); 0: all.",
    ),
    out: str = typer.Option("out/profiles", "--out", help="Root folder of profile output."),
    bench_runs: int = typer.Option(
        100, "--bench-runs", "--bench_runs", min=1, help="Timed repetitions per stage (nsys: iterations captured)."
    ),
    check: bool = typer.Option(True, "--check/--no-check", help="Check correctness against the reference first."),
    cuda_graph: bool = typer.Option(False, "--cuda-graph/--no-cuda-graph", help="Time CUDA-graph replays."),
    baseline: Path | None = typer.Option(None, "--baseline", help="Run folder to compare with (default: previous)."),
    timeout: float = typer.Option(1800.0, "--timeout", help="ncu/nsys modes: seconds before the profiler is killed."),
    lock_clocks: bool | None = typer.Option(
        None,
        "--lock-clocks/--no-lock-clocks",
        help="Lock the GPU's SM (and memory) clocks to base for the measurement and reset them after, when "
        "permitted (default: on, or KBENCH_LOCK_CLOCKS=0 for off).",
        show_default=False,
    ),
    no_wait: bool = typer.Option(
        False, "--no-wait", help="If another kbench is profiling on this GPU, stop at once instead of waiting."
    ),
    pc_sampling: bool = typer.Option(
        False,
        "--pc-sampling",
        help="proton mode: Proton's PC sampling (stall reasons per source line) in the session; its cost is in the "
        "overhead note.",
    ),
    timeline_backend: str = typer.Option(
        "auto",
        "--timeline-backend",
        help="nsys mode: auto (Nsight Systems, else PyTorch's profiler), nsys (fail without it) or torch.",
    ),
    kernel_path: list[str] = typer.Option(
        [], "--kernel-path", help="Folder of your own kernel packages (repeatable; also KBENCH_KERNEL_PATH)."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what kbench does."),
) -> None:
    """Profile a kernel plan: <kernel_package> [<version>] --<param>=<value> ... --prof_type=<mode>."""
    setup_logging(verbose)
    args = parse_plan_args(list(ctx.args))
    if list_plans:
        from kbench.cli.listing import print_listing

        print_listing(kernel_path, args.package)
        return
    if not predict:
        _warm_gpu(prof_type)
    plan = load_plan(args, kernel_path)
    if device is not None and not predict and prof_type != "access":
        raise UsageError(
            "--device names the device for --predict and --prof_type=access; profiling always runs on the active GPU"
        )
    if predict:
        from kbench.cli.listing import print_prediction

        print_prediction(plan, device)
        return
    from kbench.modes.base import RunOptions

    if prof_type not in (*registry.names(), "disabled"):
        raise UsageError(f"unknown --prof_type={prof_type}; choose one of {', '.join(registry.names())}, disabled")
    opts = RunOptions(
        out_root=out_folder(out),
        bench_runs=bench_runs,
        check=check,
        cuda_graph=cuda_graph,
        baseline=baseline,
        timeout_s=timeout,
        timeline_backend=timeline_backend,
        pc_sampling=pc_sampling,
        device=device,
        access_programs=access_programs,
        wait=not no_wait,
    )
    if lock_clocks is not None:
        opts.lock_clocks = lock_clocks
    from kbench import pipeline

    if prof_type == "disabled":
        typer.echo(pipeline.run_unprofiled(plan, check))
        return
    registry.check_options(registry.get(prof_type), opts)
    with progress() as status:
        opts.progress = status
        result = pipeline.profile(prof_type, plan, opts)
    typer.echo(result.report_md)
    typer.echo(f"kbench: wrote {Path(result.out_dir) / 'report.md'}", err=True)


def _warm_gpu(prof_type: str) -> None:
    """NVML and the CUDA driver initialised (and, where the plan runs in this process, its context made) while the
    plan and torch import: a mode whose plan runs in a child needs the driver here only to name the GPU."""
    from kbench.capture import warmup

    if prof_type == "disabled":
        warmup.start(context=True)
    elif prof_type in registry.names() and registry.gpu_needed(registry.get(prof_type)):
        warmup.start(context=registry.get(prof_type).in_process)


def command(argv: list[str] | None = None) -> Any:
    """The click command; asked for --help after a package (and version), its epilog starts with theirs."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    app.command(context_settings=CONTEXT, epilog=plan_epilog(argv or []) + EPILOG, options_metavar=USAGE)(profile)
    return typer.main.get_command(app)


def asked_plan(argv: list[str]) -> tuple[str | None, str | None, list[str]]:
    """The package and version named before the first option of a command line, and its --kernel-path values."""
    words: list[str] = []
    for token in argv:
        if token.startswith("-"):
            break
        words.append(token)
    paths = [a.split("=", 1)[1] for a in argv if a.startswith("--kernel-path=")]
    paths += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--kernel-path"]
    return (words[0] if words else None), (words[1] if len(words) > 1 else None), paths


def plan_epilog(argv: list[str]) -> str:
    """For `<package> [<version>] --help`: that plan's docstring, versions and parameters (click keeps the lines as
    written after a \\b line), or why they cannot be shown; nothing otherwise."""
    if not {"-h", "--help"} & set(argv):
        return ""
    package, version, paths = asked_plan(argv)
    if package is None:
        return ""
    from kbench.cli.listing import plan_help
    from kbench.errors import KbenchError

    try:
        text = plan_help(package, version, paths)
    except KbenchError as e:
        text = f"({e})"
    return "\b\n" + text + "\n\n"


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    run_command(command(args), args, "python -m kbench.kernel")
