"""The `kbench` command: profile, check, list."""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from kbench.cli import analyze, kernel
from kbench.cli.common import load_plan, out_folder, parse_plan_args, run_command, setup_logging
from kbench.errors import SweepFailures, UsageError
from kbench.fsutil import safe
from kbench.modes import registry

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
    accesses: bool = typer.Option(
        False, "--access", help="On CPU: each load/store line's bytes, masked lanes, stride, sector use, reuse."
    ),
    pictures: Path | None = typer.Option(
        None, "--access-pictures", help="With --access: a PNG per tensor (which program read/wrote each element) here."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what kbench does."),
) -> None:
    """Check a plan's correctness: <kernel_package> [<version>] [--<param>=<value> ...].

    On a CUDA GPU at the given (default) sizes; without one, under Triton's CPU interpreter at the plan's
    small check sizes (a bf16 plan then runs in float16, or float32 where it allows no float16, and says so). Every
    tuning configuration is checked; every version of the package when no version is named (a version that cannot
    run the given parameters is skipped, saying why).
    """
    setup_logging(verbose)
    from kbench.capture import check, gpu
    from kbench.plan.discovery import find_package

    args = parse_plan_args(list(ctx.args))
    if pictures is not None:
        try:  # the user's own destination, made (or refused) before any check runs
            pictures.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--access-pictures {pictures}: cannot make that folder ({e.strerror})") from None
    on_gpu = gpu.cuda_available()
    if not on_gpu:
        check.use_interpreter()
    if args.package is None:
        load_plan(args, kernel_path)  # the one line that asks for a package
    assert args.package is not None
    versions = [args.version] if args.version else find_package(args.package, kernel_path).versions()
    where = "CUDA GPU" if on_gpu else check.INTERPRETER
    results: list[Any] = []
    skipped: list[str] = []
    for version in versions:
        asked = dataclasses.replace(args, version=version)
        note = ""
        try:
            plan = load_plan(asked, kernel_path)  # validates the user's values as given
            if not on_gpu:
                values, note = check.cpu_values(type(plan), dict(args.values))
                plan = type(plan).from_values(values)
        except UsageError as e:
            if args.version:
                raise
            typer.echo(f"skipping {args.package} {version}: {e}")
            skipped.append(version)
            continue
        typer.echo(f"checking {plan.package} {plan.version} {plan.values()} on {where}{'; ' + note if note else ''}")
        mine = check.check_plan(plan, "cuda" if on_gpu else "cpu", note, maps=pictures is not None)
        for r in mine:
            typer.echo(f"  {r.stage} {r.config or '(default)'}: {r.result.verdict()}")
        results += mine
        if accesses or pictures is not None:
            typer.echo(access_lines(mine, on_gpu, plan))
        if pictures is not None and mine and mine[0].touched:
            from kbench.report.chart import access_png, traced_at

            where = traced_at(plan, mine[0].stage, mine[0].config)
            for t in mine[0].touched:
                path = access_png(t, pictures / f"{plan.package}-{plan.version}-{safe(t.name)}.png", where)
                typer.echo(f"  picture: {path}")
    checked = len(versions) - len(skipped)
    if checked == 0:
        raise UsageError(f"no version of {args.package} can run these parameters (each skipped above)")
    failed = [r for r in results if not r.result.passed]
    scope = f" of {checked} version(s)" + (f" ({len(skipped)} skipped)" if skipped else "") if len(versions) > 1 else ""
    if failed:
        typer.echo(f"kbench: error: {len(failed)} of {len(results)} configuration(s){scope} failed the check", err=True)
        sys.exit(5)
    built = sum(1 for r in results if r.result.compiled)
    if built:
        typer.echo(
            f"all {len(results)} configuration(s){scope} pass or compile: {built} with Gluon kernels compiled for "
            "sm_90 and not run (numerics need a GPU)"
        )
        return
    typer.echo(f"all {len(results)} configuration(s){scope} pass")


def access_lines(checks: list[Any], on_gpu: bool, plan: Any) -> str:
    """`kbench check --access`: the load/store lines of the version's first (default) configuration."""
    if on_gpu:
        return "  accesses: traced only under the CPU interpreter (run kbench check on a machine without a GPU)"
    from kbench.analysis.access_facts import table

    first = next((c for c in checks if c.sites), None)
    if first is None:
        return "  accesses: none traced (no Triton kernel ran under the interpreter)"
    return (
        f"  accesses of {plan.package} {plan.version} at {plan.values()}, predicted on CPU (Triton interpreter; a warp "
        "= 32 neighbouring lanes of the last axis):\n" + table(first.sites, str(Path.cwd()))
    )


@app.command(
    "analyze",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
    help=analyze.DOC,
)
def analyze_cmd(ctx: typer.Context) -> None:
    # kbench.cli.analyze parses its own options (and --help); the console script goes there without typer
    analyze.command(list(ctx.args))


@app.command("compare")
def compare_cmd(
    a: Path = typer.Argument(..., help="A run folder (the baseline; with --previous, the run to compare)."),
    b: Path | None = typer.Argument(None, help="The run folder compared against A."),
    previous: bool = typer.Option(
        False, "--previous", help="Compare A with the latest earlier finished run of its mode, kernel and parameters."
    ),
    fmt: str = typer.Option("md", "--format", help="md (a markdown table, also for the terminal) or json."),
) -> None:
    """Two finished runs side by side: the plan's duration, then per stage both have its duration and roofline
    efficiency, with the change ('within noise' where the interquartile ranges overlap), and what differs between
    the runs (kernel, parameters, mode, device, stages) and could not be compared."""
    from kbench.errors import UsageError
    from kbench.report.comparison import compare_asked, markdown

    if fmt not in ("md", "json"):
        raise UsageError(f"--format={fmt}: choose md or json")
    c = compare_asked(a, b, previous, "--previous")
    typer.echo(c.model_dump_json(indent=1) if fmt == "json" else markdown(c))


@app.command("clone")
def clone_cmd(
    package: str = typer.Argument(..., help="The kernel package."),
    old: str = typer.Argument(..., metavar="FROM", help="The version to copy."),
    new: str = typer.Argument(..., metavar="TO", help="The new version's name (a module name: v3, fused, ...)."),
    kernel_path: list[str] = typer.Option(
        [],
        "--kernel-path",
        help="Folder of your own kernel packages (default for a shipped package's copy: ./kernels, which in kbench's "
        "own checkout or package must be named explicitly). Never written through a symbolic link.",
    ),
) -> None:
    """Copy a version module into a new one beside it: symbols it defines whose name holds the version (mla_v1_kernel,
    MlaV1, V1_TILES) are renamed with every use (strings such as a stage's kernels=[...] included), so both versions
    register and profile side by side with distinct kernel names. The helper modules holding the Triton kernels it
    imports (_triton.py) are copied for it alone (_triton_<to>.py): edit those to change the new version only. A
    shipped package is first copied into your kernel path (the first --kernel-path, made if missing, else
    KBENCH_KERNEL_PATH's, else ./kernels, except in kbench's own checkout or package, where one line asks for
    --kernel-path) as my_<pkg>. A kernel path or package folder that is a link, or leads out of this folder through
    one, is refused. Never overwrites; the new version is imported once to check it registers (what was written is
    removed again if it does not)."""
    from kbench.plan.clone import clone_version

    done = clone_version(package, old, new, kernel_path)
    for line in clone_lines(done, package, old, new):
        typer.echo(line)


def clone_lines(done: Any, package: str, old: str, new: str) -> list[str]:
    """What `kbench clone` says: where the copy went, what was renamed, which files to edit, how to profile it."""
    lines = []
    where = f" --kernel-path {done.path.parent.parent}"  # the folder the package lies in: a kernel path
    if done.copied_to is not None:
        lines.append(f"copied the shipped package {package} into {done.copied_to} (yours to edit; kbench's stays)")
    renamed = ", ".join(f"{a} -> {b}" for a, b in done.renamed.items()) or "no version-named symbols"
    lines.append(f"cloned {done.package} {old} -> {new}: {done.path} (renamed: {renamed})")
    edit = [str(done.path), *(str(p) for p in done.own)]
    lines.append(
        f"edit: {', '.join(edit)}" + (f" (shared with other versions: {', '.join(done.shared)})" if done.shared else "")
    )
    lines.append(f"profile it: python -m kbench.kernel {done.package} {new}{where} --prof_type=event")
    return lines


@app.command("devlog")
def devlog_cmd(
    run: Path = typer.Argument(..., help="A finished run folder (see kbench runs)."),
    insight: list[str] = typer.Option(
        [], "--insight", help="A line for **Insights** (why a change worked or not; repeat for more)."
    ),
    docs: Path | None = typer.Option(
        None,
        "--docs",
        help="Folder of the development logs (default: docs/kernels in the folder you stand in; in kbench's own "
        "checkout or package give it explicitly). Never written through a symbolic link.",
    ),
) -> None:
    """Append the run's development-log entry (the report contract's template: duration, TFLOP/s, GB/s, occupancy,
    TC utilisation, each vs the previous entry of the same mode and parameters; bottleneck; issues; insights) to
    <docs>/<kernel>.md. Earlier entries are never rewritten; values from result.json go in as one line of text each."""
    from kbench.report import devlog
    from kbench.report.models import load_result

    result = load_result(run)
    path, text = devlog.append(result, run, docs if docs is not None else devlog.default_docs(), insight)
    typer.echo(text)
    typer.echo(f"kbench: appended to {path}", err=True)


@app.command("mcp")
def mcp_cmd(
    kernel_path: list[str] = typer.Option([], "--kernel-path", help="Folder of your own kernel packages."),
    root: list[str] = typer.Option(
        [],
        "--root",
        help="A folder the tools may read and write (repeatable); default: the client's MCP roots, else this folder.",
    ),
) -> None:
    """Serve kbench to coding agents over MCP (stdio): list_kernels, profile (with progress), check, analyze,
    read_report, compare, runs, devlog and clone_version, each answering with structured data; errors come back as
    one line. Every answer stays under 40,000 characters (report.md and files are paged: read_report's offset).
    File access stays inside the --root folders, else the client's MCP roots, else the folder the server was started
    in (`--root /` lifts the bound). Register it with an MCP client as the command `kbench mcp`."""
    from kbench.cli.mcp_server import serve
    from kbench.plan.discovery import kernel_paths

    kernel_paths(kernel_path)  # a --kernel-path that is not a folder: one line (exit 2), not a server that lacks it
    serve(kernel_path, root)


@app.command("sweep", context_settings=kernel.CONTEXT)
def sweep_cmd(
    ctx: typer.Context,
    prof_type: str = typer.Option(registry.DEFAULT, "--prof_type", "--prof-type", help="The mode of every point."),
    out: str | None = typer.Option(
        None,
        "--out",
        help="Root folder of the points' profiles (default out/profiles; with --resume, the one sweep.json records "
        "where it lies below this folder, else give it).",
    ),
    sweep_out: str = typer.Option("out/sweeps", "--sweep-out", help="Root folder of the sweep's table and plots."),
    bench_runs: int | None = typer.Option(None, "--bench-runs", "--bench_runs", min=1, help="Repetitions per stage."),
    device: str | None = typer.Option(
        None, "--device", help="With --prof_type=access: the device its points predict for (a conf/devices.json key)."
    ),
    resume: Path | None = typer.Option(
        None, "--resume", help="An interrupted sweep's folder: run what it lacks (its points under --out, see there)."
    ),
    gpus: str | None = typer.Option(
        None, "--gpus", help="all, or GPU indices (0,1): one worker per GPU, each under that GPU's lock; merged."
    ),
    executor: str = typer.Option(
        "local", "--executor", help="local (this host: one process, or one per --gpus), or ray (a task per point)."
    ),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="With --executor ray: the cluster (auto: the one running here; omitted: a new one)."
    ),
    ray_retries: int | None = typer.Option(
        None, "--ray-retries", help="With --executor ray: retries of a point whose worker or node dies (default 2)."
    ),
    fetch_captures: bool = typer.Option(
        False, "--fetch-captures", help="With --executor ray: bring .ncu-rep/.nsys-rep/.sqlite captures home too."
    ),
    worker: str | None = typer.Option(None, "--worker", hidden=True, help="i/n: run the i-th share (internal)."),
    kernel_path: list[str] = typer.Option([], "--kernel-path", help="Folder of your own kernel packages."),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Profile versions over a grid: <kernel_package> [<version> ...] --<param>=<v1>,<v2>,... [--<param>=<v>].

    A comma list sweeps a parameter; every version (all of the package's by default) runs at every combination.
    Writes <sweep-out>/<kernel>/<timestamp>/ with sweep.csv, sweep.md (the table and the bound-flip map: where
    along each swept parameter the classification changes, and which version is fastest where) and plots/; each
    point is an ordinary run folder under --out. A point a version cannot run is a row saying why.

    --executor ray runs each point as a Ray task of one GPU (pip install "kbench[ray]"; --ray-address auto joins the
    cluster running here, none starts a local one); the points' small files come home under --out, each run folder
    saying in placement.json which host and GPU it ran on; large captures stay on the node unless --fetch-captures.
    """
    setup_logging(verbose)
    from kbench import api, sweep, sweep_report
    from kbench.cli.common import progress

    devices = [] if gpus is None or worker is not None else sweep_gpus(gpus)
    how = api.SweepExecutor(executor, tuple(devices), ray_address, ray_retries, fetch_captures)
    if resume is not None:
        if ctx.args or device is not None:
            raise UsageError("--resume takes the sweep as it was asked; give no kernel, parameters or --device with it")
        spec = sweep.resumed(resume, None if out is None else str(out_folder(out)))
    else:
        args = parse_sweep_args(list(ctx.args))
        root = "out/profiles" if out is None else str(out_folder(out))
        spec = sweep.ask(
            args.package or "", args.versions, args.values, prof_type, root, bench_runs, kernel_path, device
        )
    how.check_here(spec["mode"])  # without the GPU its points need: one line, before a folder or a point
    sweep_dir = resume if resume is not None else sweep.new_dir(out_folder(sweep_out), spec["kernel"])
    if worker is not None:  # one share of a --gpus sweep, in its own process: the parent merges the rows
        with progress() as status:
            point = sweep.profiler(spec, kernel_path, status)
            sweep.run(
                spec, sweep_dir, point, status, share=sweep_share(worker), gpu=os.environ.get("CUDA_VISIBLE_DEVICES")
            )
        return
    if devices:
        typer.echo(
            f"kbench: {len(devices)} worker(s), one per GPU ({', '.join(devices)}); logs in {sweep_dir}", err=True
        )
    with progress() as status:
        rows = api.run_sweep(spec, sweep_dir, kernel_path, status, how)
    typer.echo(sweep_report.write(rows, spec, sweep_dir))
    counts, code = sweep.outcome(rows)
    if code:
        raise SweepFailures(f"wrote {sweep_dir / 'sweep.md'}; {counts}", code)
    typer.echo(f"kbench: wrote {sweep_dir / 'sweep.md'}; {counts}", err=True)


@app.command("runs")
def runs_cmd(
    kernel: str | None = typer.Argument(None, help="Only this kernel package's runs."),
    out: Path | None = typer.Option(None, "--out", help="Root folder of the runs (default: out/profiles)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="At most this many (the newest)."),
    as_json: bool = typer.Option(False, "--json", help="A JSON list, one object per run, instead of the table."),
) -> None:
    """The earlier runs under the output root (at any depth: kbench's layout, committed or renamed run folders),
    newest first: when, mode, kernel, version, duration (the whole plan's median, else the stages' sum),
    bottleneck, status, parameters and folder.

    Status: running (its process is still at work), ok (finished, report written), failed (stopped with an error:
    params.json's error, FAILED.txt), interrupted (Ctrl-C or a signal ended it), undecided (a timeline without a
    plan that kbench could not classify: timeline.md, no report.md), died (its process is gone without a word),
    unreadable (not even params.json could be read)."""
    import json

    from kbench.report.folder import DEFAULT_ROOT
    from kbench.report.runs import runs, table

    if out is not None and not out.is_dir():  # a root named that is not there: a typo, not "no runs yet"
        raise UsageError(f"--out {out} is not a folder; name the root of the runs (default {DEFAULT_ROOT})")
    out = out or DEFAULT_ROOT
    rows = runs(out, kernel, limit)
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=1))
    elif rows:
        typer.echo(table(rows))
    else:
        typer.echo(f"no runs under {out}{f' for {kernel}' if kernel else ''}", err=True)


@app.command("list")
def list_cmd(
    package: str | None = typer.Argument(None, help="Only this kernel package."),
    kernel_path: list[str] = typer.Option([], "--kernel-path", help="Folder of your own kernel packages."),
) -> None:
    """List kernel packages (or one), their versions, parameters and defaults."""
    from kbench.cli.listing import print_listing

    print_listing(kernel_path, package)


def sweep_share(worker: str | None) -> tuple[int, int]:
    if worker is None:
        return (0, 1)
    i, _, n = worker.partition("/")
    if not (i.isdigit() and n.isdigit() and int(i) < int(n)):
        raise UsageError(f"--worker={worker}: i/n with 0 <= i < n")
    return (int(i), int(n))


def sweep_gpus(gpus: str) -> list[str]:
    """--gpus all (every GPU NVML or torch sees) or a list of indices."""
    if gpus == "all":
        from kbench.capture import gpu

        count = gpu.device_count()
        if count == 0:
            from kbench.errors import NoGpuError

            raise NoGpuError("--gpus all: no CUDA GPU is visible")
        return [str(i) for i in range(count)]
    found = [g.strip() for g in gpus.split(",")]
    if not found or not all(g.isdigit() for g in found) or len(set(found)) != len(found):
        raise UsageError(f"--gpus={gpus}: all, or distinct GPU indices such as 0,1")
    return found


@dataclass
class SweepArgs:
    package: str | None = None
    versions: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)


def parse_sweep_args(tokens: list[str]) -> SweepArgs:
    """<kernel_package> [<version> ...] --name=a,b,... : like the profile command's, with several versions."""
    out = SweepArgs()
    for tok in tokens:
        if tok.startswith("-"):
            one = parse_plan_args([tok]).values
            if dup := set(one) & set(out.values):
                raise UsageError(f"--{dup.pop()} is given twice; give it once (a comma list sweeps it)")
            out.values.update(one)
        elif out.package is None:
            out.package = tok
        else:
            out.versions.append(tok)
    if out.package is None:
        raise UsageError("name a kernel package to sweep, e.g. `kbench sweep mla_decode v1 v2 --s=1,4,16`")
    return out


def main(argv: list[str] | None = None) -> None:
    command: Any = typer.main.get_command(app)
    run_command(command, argv if argv is not None else sys.argv[1:], "kbench")
