"""`kbench mcp`: kbench's commands as MCP tools (stdio), for coding agents, on the official `mcp` SDK (2.x).

Each tool is the same function the CLI command calls, with a structured (schema'd) answer. A kbench error comes back
as a tool error carrying its one line; anything else as a tool error naming it a kbench bug, never a traceback.
Profiling reports progress (one notification per step the pipeline announces).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from kbench.errors import KbenchError, first_line
from kbench.model import Model
from kbench.modes import registry
from kbench.report.comparison import Comparison
from kbench.report.models import ProfileResult
from kbench.report.report_json import ReportJson
from kbench.report.runs import RunRow
from kbench.version import __version__

P = ParamSpec("P")
R = TypeVar("R")
OUT = "out/profiles"
INSTRUCTIONS = (
    "kbench profiles GPU kernel plans (Triton/PyTorch) against the device roofline. Loop: list_kernels -> "
    "profile (event mode first; annotation for counters) -> read_report -> change the kernel (clone_version for "
    "the next version) -> profile it -> compare (with previous=true) -> devlog. Every number in report.json says "
    "whether it was measured, analytic or derived; Top 3 gains are estimated against measured ceilings."
)

PROFILE = (
    "Profile a kernel version on this machine's GPU (params as in `--name=value`, defaults otherwise) in a mode: "
    + "; ".join(f"{name}: {what}" for name, what in registry.SUMMARY.items())
    + ". Returns the run folder, report.md and report.json; reports progress as it goes. Needs a CUDA GPU (and ncu "
    "for annotation/ncu, nsys for nsys)."
)


def one_line_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """A KbenchError as its one line; any other exception as a one-line kbench bug (exit 70 on the CLI)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except KbenchError as e:
            raise ToolError(first_line(e)) from None
        except Exception as e:
            raise ToolError(f"kbench bug ({type(e).__name__}): {first_line(e)}") from None

    return wrapper


class Param(Model):
    name: str
    type: str
    default: Any
    help: str
    choices: list[Any] = Field(default_factory=list)


class Version(Model):
    version: str
    doc: str
    broken: str | None = None  # why it cannot be imported


class KernelPackage(Model):
    package: str
    doc: str
    origin: str  # "kbench" or the folder it came from
    baseline: str
    versions: list[Version]
    params: list[Param]
    broken: str | None = None  # why the package cannot be imported


class Kernels(Model):
    kernels: list[KernelPackage]


class RunDone(Model):
    run: str  # the run folder
    report_md: str  # report.md as written
    report: ReportJson  # report.json as written


class ReportText(Model):
    run: str
    format: Literal["md", "json"]
    text: str


class Runs(Model):
    runs: list[RunRow]


class Logged(Model):
    path: str
    entry: str


class Cloned(Model):
    path: str
    renamed: dict[str, str]
    package: str = Field(description="the package the new version is in (a shipped one's copy: my_<pkg>)")
    edit: list[str] = Field(description="the files to edit: the new version and its own copies of kernel helpers")
    shared: list[str] = Field(description="modules of its package it imports, shared with the other versions")
    kernel_path: str | None = Field(description="where a shipped package was copied: pass it as kernel_path")


def _kernels(kernel_path: list[str]) -> Kernels:
    from kbench.plan.discovery import catalogue

    return Kernels(
        kernels=[
            KernelPackage(
                package=pkg.name,
                doc=pkg.doc,
                origin=pkg.origin,
                baseline=pkg.baseline,
                versions=[Version(version=v.version, doc=v.doc, broken=v.broken) for v in pkg.versions],
                params=[
                    Param(name=p.name, type=p.type_name, default=p.default, help=p.help, choices=list(p.choices))
                    for p in pkg.params
                ],
                broken=pkg.broken,
            )
            for pkg in catalogue(kernel_path)
        ]
    )


def _done(result: ProfileResult) -> RunDone:
    """The answer to a profile or analyze: the run folder, its report.md as written, and report.json's facts (built
    from the same result the pipeline wrote them from)."""
    from kbench.report import report_json

    return RunDone(run=result.out_dir, report_md=result.report_md, report=report_json.build(result))


def _plan(kernel: str, version: str | None, params: dict[str, str], kernel_path: list[str]) -> Any:
    from kbench.cli.common import PlanArgs, load_plan

    return load_plan(PlanArgs(kernel, version, {k: str(v) for k, v in params.items()}), kernel_path)


def build(kernel_path: list[str] | None = None) -> MCPServer:
    """The server, its tools bound to ``kernel_path`` (user kernel folders, besides KBENCH_KERNEL_PATH)."""
    paths = list(kernel_path or [])
    server = MCPServer("kbench", version=__version__, instructions=INSTRUCTIONS)

    @server.tool()
    @one_line_errors
    def list_kernels() -> Kernels:
        """Every kernel package: its versions (the baseline named), and its parameters with defaults and choices."""
        return _kernels(paths)

    @server.tool(description=PROFILE)
    async def profile(
        ctx: Context,
        kernel: str,
        version: str | None = None,
        params: dict[str, str] | None = None,
        mode: str = "event",
        out: str = OUT,
        bench_runs: int | None = None,
    ) -> RunDone:
        """PROFILE (the tool's description)."""
        steps = iter(range(1, 1 << 30))

        def step(message: str) -> None:  # called from the worker thread the pipeline runs in
            anyio.from_thread.run(ctx.report_progress, next(steps), None, message)

        @one_line_errors
        def work() -> RunDone:
            from kbench import pipeline
            from kbench.modes import registry
            from kbench.modes.base import RunOptions

            plan = _plan(kernel, version, params or {}, paths)
            runs = bench_runs if bench_runs is not None else registry.get(mode).default_bench_runs
            opts = dataclasses.replace(RunOptions.for_api(out, runs), progress=step)
            return _done(pipeline.profile(mode, plan, opts))

        return await anyio.to_thread.run_sync(work)

    @server.tool()
    @one_line_errors
    def analyze(
        capture: str,
        mode: Literal["annotation", "ncu"] | None = None,
        plan: str | None = None,
        plan_version: str | None = None,
        params: dict[str, str] | None = None,
        out: str = OUT,
    ) -> RunDone:
        """The reports of an existing capture (.ncu-rep, nsys .sqlite, PyTorch-profiler .json), no GPU needed; with
        `plan` its stages and FLOP/byte model are used."""
        from kbench import pipeline
        from kbench.modes import registry

        path = Path(capture)
        registry.for_capture(path, mode)
        the_plan = _plan(plan, plan_version, params or {}, paths) if plan else None
        return _done(pipeline.analyze(path, mode, Path(out), the_plan))

    @server.tool()
    @one_line_errors
    def read_report(run: str, format: Literal["md", "json"] = "md") -> ReportText:
        """A run folder's report.md, or its report.json (every number with its source)."""
        from kbench.errors import UsageError
        from kbench.report import folder

        name = "report.md" if format == "md" else folder.REPORT_JSON
        path = Path(run) / name
        if not path.is_file():
            raise UsageError(f"{run} has no {name}: name the folder of a finished run (see the runs tool)")
        return ReportText(run=run, format=format, text=path.read_text())

    @server.tool()
    @one_line_errors
    def compare(a: str, b: str | None = None, previous: bool = False) -> Comparison:
        """Two finished runs side by side (a the baseline), or a run and its previous one of the same mode, kernel
        and parameters (previous=true): changes with 'within noise' where the IQRs overlap, and what differs."""
        from kbench.report.comparison import compare_asked

        return compare_asked(Path(a), Path(b) if b is not None else None, previous, "previous=true")

    @server.tool()
    @one_line_errors
    def runs(kernel: str | None = None, out: str = OUT, limit: int | None = 20) -> Runs:
        """The earlier runs under the output root, newest first, with status, duration and bottleneck."""
        from kbench.report.runs import runs as listed

        return Runs(runs=listed(Path(out), kernel, limit))

    @server.tool()
    @one_line_errors
    def devlog(run: str, insights: list[str] | None = None, docs: str = "docs/kernels") -> Logged:
        """Append the run's development-log entry (vs the previous entry of the same mode and parameters) to
        docs/kernels/<kernel>.md; earlier entries are never rewritten."""
        from kbench.report import devlog as log
        from kbench.report.comparison import load_result

        path, entry = log.append(load_result(Path(run)), Path(run), Path(docs), list(insights or []))
        return Logged(path=str(path), entry=entry)

    @server.tool()
    @one_line_errors
    def clone_version(kernel: str, source: str, target: str, kernel_path: str | None = None) -> Cloned:
        """Copy version `source` of a kernel package into a new version `target` (version-named symbols renamed,
        the Triton helper modules it imports copied for it alone); never overwrites. A shipped package is first
        copied into `kernel_path` (default: the server's kernel path, else ./kernels) as my_<pkg>: profile it with
        that package name."""
        from kbench.plan.clone import clone_version as cloned

        done = cloned(kernel, source, target, [kernel_path, *paths] if kernel_path else paths)
        where = str(done.copied_to.parent) if done.copied_to is not None else None
        if where is not None and where not in paths:
            paths.append(where)  # the copy is visible to this server's later calls
        return Cloned(path=str(done.path), renamed=done.renamed, package=done.package,
                      edit=[str(done.path), *(str(p) for p in done.own)], shared=list(done.shared),
                      kernel_path=where)  # fmt: skip

    return server


def serve(kernel_path: list[str]) -> None:
    build(kernel_path).run("stdio")
