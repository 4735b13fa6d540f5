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
# Every answer stays under ANSWER_CHARS characters as the client receives it (about 10k tokens; Claude Code refuses a
# tool result over 25,000 tokens). The SDK sends the structured answer twice (as structured content and as its JSON
# text), so the structured answer is held under JSON_CHARS: report.md and files are paged, report.json is left out of
# a profile/analyze answer that would pass it (read_report pages it), lists are cut.
ANSWER_CHARS = 40_000
JSON_CHARS = ANSWER_CHARS // 2 - 1_000
MD_CHARS = 8_000
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
    "for annotation/ncu, nsys for nsys), except access mode, which runs on the CPU and predicts for `device` (a key of "
    "conf/devices.json; default this machine's GPU, else H100_SXM)."
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
    report_md: str = Field(description="report.md as written, its first MD_CHARS characters when longer")
    report_md_chars: int = Field(description="report.md's whole length")
    report: ReportJson | None = Field(description="report.json's facts; None when they would pass the answer's bound")
    more: str | None = Field(description="what was left out of this answer, and the read_report call that pages it")


class ReportText(Model):
    run: str
    format: Literal["md", "json"]
    text: str = Field(description="the file from offset, at most max_chars characters")
    offset: int
    total_chars: int
    next_offset: int | None = Field(description="where the rest starts (call again with it); None at the end")


class Checked(Model):
    passed: bool
    exit_code: int
    output: str = Field(description="`kbench check`'s lines: each version and configuration with its verdict")


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
    """The answer to a profile or analyze: the run folder, its report.md as written (its head when long), and
    report.json's facts (built from the same result the pipeline wrote them from) when the answer stays bounded."""
    from kbench.report import report_json

    md = result.report_md
    facts = report_json.build(result)
    more: list[str] = []
    if len(md) > MD_CHARS:
        more.append(f"report.md is {len(md)} characters, {MD_CHARS} here: read_report(run, offset={MD_CHARS}) pages it")
        md = md[:MD_CHARS]
    answer = RunDone(run=result.out_dir, report_md=md, report_md_chars=len(result.report_md), report=facts, more=None)
    if len(answer.model_dump_json()) > JSON_CHARS:
        more.append(
            "report.json left out (it would pass this answer's bound): read_report(run, format='json') pages it"
        )
        answer.report = None
    answer.more = "; ".join(more) or None
    return answer


def _page(text: str, offset: int, max_chars: int) -> tuple[str, int | None]:
    """``text`` from ``offset``, at most ``max_chars`` characters (and never so many that the answer passes
    JSON_CHARS once escaped as a JSON string), and where the rest starts (None at the end)."""
    if offset < 0 or max_chars < 1:
        from kbench.errors import UsageError

        raise UsageError(f"offset {offset} and max_chars {max_chars}: offset >= 0, max_chars >= 1")
    import json

    end = offset + min(max_chars, JSON_CHARS - 1_000)
    while end > offset + 1 and len(json.dumps(text[offset:end])) > JSON_CHARS - 1_000:  # quotes and newlines escaped
        end = offset + (end - offset) * 3 // 4
    return text[offset:end], (end if end < len(text) else None)


class Roots:
    """The folders file access may reach: ``kbench mcp --root DIR`` (for clients without roots), else the client's
    MCP roots when it declares them, else anywhere (a client that declares none asked for no bound)."""

    def __init__(self, fixed: list[str]) -> None:
        self.fixed = [Path(r).expanduser().resolve() for r in fixed]

    async def of(self, ctx: Context) -> list[Path] | None:
        if self.fixed:
            return self.fixed
        import inspect
        import warnings
        from urllib.parse import unquote, urlparse

        from mcp import types
        from mcp.shared.exceptions import MCPDeprecationWarning, NoBackChannelError

        session = ctx.session
        with warnings.catch_warnings():  # roots are deprecated in the 2026-07-28 protocol (SEP-2577), still sent
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if not session.check_client_capability(types.ClientCapabilities(roots=types.RootsCapability())):
                return None
            try:
                listed = session.list_roots()
                if inspect.isawaitable(listed):
                    listed = await listed
            except NoBackChannelError:  # a transport that cannot ask the client (in-process, modern protocol)
                return None
        return [Path(unquote(urlparse(str(r.uri)).path)).resolve() for r in listed.roots]


def inside(path: str, roots: list[Path] | None, what: str) -> Path:
    """``path`` (relative to the server's folder), refused with one line when it leads outside ``roots`` (``..``
    and symbolic links followed first)."""
    from kbench.errors import UsageError

    given = Path(path).expanduser()
    if roots is None:
        return given
    real = (Path.cwd() / given).resolve()
    if not any(real == r or real.is_relative_to(r) for r in roots):
        raise UsageError(
            f"{what} {path} is outside the roots this MCP client allows ({', '.join(map(str, roots))}); "
            "name a path inside them"
        )
    return given


def _plan(kernel: str, version: str | None, params: dict[str, str], kernel_path: list[str]) -> Any:
    from kbench.cli.common import PlanArgs, load_plan

    return load_plan(PlanArgs(kernel, version, {k: str(v) for k, v in params.items()}), kernel_path)


def build(kernel_path: list[str] | None = None, roots: list[str] | None = None) -> MCPServer:
    """The server, its tools bound to ``kernel_path`` (user kernel folders, besides KBENCH_KERNEL_PATH); file access
    bounded by ``roots`` (``--root``), else by the client's MCP roots (see ``Roots``)."""
    paths = list(kernel_path or [])
    bound = Roots(list(roots or []))
    server = MCPServer("kbench", version=__version__, instructions=INSTRUCTIONS)

    async def in_thread(work: Callable[[], R]) -> R:
        return await anyio.to_thread.run_sync(one_line_errors(work))

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
        device: str | None = None,
    ) -> RunDone:
        """PROFILE (the tool's description)."""
        steps = iter(range(1, 1 << 30))
        allowed = await bound.of(ctx)

        def step(message: str) -> None:  # called from the worker thread the pipeline runs in
            anyio.from_thread.run(ctx.report_progress, next(steps), None, message)

        def work() -> RunDone:
            from kbench import pipeline
            from kbench.modes import registry
            from kbench.modes.base import RunOptions

            root = inside(out, allowed, "out")
            plan = _plan(kernel, version, params or {}, paths)
            runs = bench_runs if bench_runs is not None else registry.get(mode).default_bench_runs
            named = {"device": device} if device is not None else {}  # access mode: the device to predict for
            opts = dataclasses.replace(RunOptions.for_api(root, runs, **named), progress=step)
            return _done(pipeline.profile(mode, plan, opts))

        return await in_thread(work)

    @server.tool()
    async def check(
        kernel: str, version: str | None = None, params: dict[str, str] | None = None, access: bool = False
    ) -> Checked:
        """`kbench check`: the plan's correctness against its reference for every tuning configuration (of every
        version when none is named), on this machine's GPU, or without one under Triton's CPU interpreter at the
        plan's small check sizes (bf16 as fp16/fp32, said so); there every load and store is traced: an access out of
        bounds fails it, naming the line, and `access` adds each load/store line's facts (bytes, masked lanes, stride,
        bytes used per 32-byte sector, reuse). Runs in its own process; it touches no file the client names."""

        def work() -> Checked:
            import sys

            from kbench.capture import tools

            argv = [sys.executable, "-m", "kbench", "check", kernel, *([version] if version else [])]
            argv += [f"--{k}={v}" for k, v in (params or {}).items()] + [f"--kernel-path={k}" for k in paths]
            argv += ["--access"] if access else []
            import tempfile

            with tempfile.TemporaryDirectory(prefix="kbench-check-") as tmp:
                done = tools.run(argv, timeout_s=1800, log_path=Path(tmp) / "check.log")
            if done.returncode not in (0, 5):  # 5: the check ran and a configuration failed, an answer; else an error
                said = [line for line in done.log.splitlines() if line.startswith("kbench: error: ")]
                raise KbenchError(
                    said[-1].removeprefix("kbench: error: ") if said else f"kbench check exited {done.returncode}"
                )
            text, _ = _page(done.log, max(0, len(done.log) - MD_CHARS), MD_CHARS)
            return Checked(passed=done.returncode == 0, exit_code=done.returncode, output=text)

        return await in_thread(work)

    @server.tool()
    async def analyze(
        ctx: Context,
        capture: str,
        mode: Literal["annotation", "ncu"] | None = None,
        plan: str | None = None,
        plan_version: str | None = None,
        params: dict[str, str] | None = None,
        out: str = OUT,
    ) -> RunDone:
        """The reports of an existing capture (.ncu-rep, nsys .sqlite, PyTorch-profiler .json, Proton .hatchet), no
        GPU needed; with `plan` its stages and FLOP/byte model are used."""
        allowed = await bound.of(ctx)

        def work() -> RunDone:
            from kbench import pipeline
            from kbench.modes import registry

            path = inside(capture, allowed, "capture")
            root = inside(out, allowed, "out")
            registry.for_capture(path, mode)
            the_plan = _plan(plan, plan_version, params or {}, paths) if plan else None
            return _done(pipeline.analyze(path, mode, root, the_plan))

        return await in_thread(work)

    @server.tool()
    async def read_report(
        ctx: Context, run: str, format: Literal["md", "json"] = "md", offset: int = 0, max_chars: int = ANSWER_CHARS
    ) -> ReportText:
        """A run folder's report.md, or its report.json (every number with its source), from `offset`, at most
        `max_chars` characters (bounded); `next_offset` says where the rest starts."""
        allowed = await bound.of(ctx)

        def work() -> ReportText:
            from kbench.errors import UsageError
            from kbench.report import folder

            name = "report.md" if format == "md" else folder.REPORT_JSON
            path = inside(run, allowed, "run") / name
            if not path.is_file():
                raise UsageError(f"{run} has no {name}: name the folder of a finished run (see the runs tool)")
            whole = path.read_text()
            text, rest = _page(whole, offset, max_chars)
            return ReportText(
                run=run, format=format, text=text, offset=offset, total_chars=len(whole), next_offset=rest
            )

        return await in_thread(work)

    @server.tool()
    async def compare(ctx: Context, a: str, b: str | None = None, previous: bool = False) -> Comparison:
        """Two finished runs side by side (a the baseline), or a run and its previous one of the same mode, kernel
        and parameters (previous=true): changes with 'within noise' where the IQRs overlap, and what differs."""
        allowed = await bound.of(ctx)

        def work() -> Comparison:
            from kbench.report.comparison import compare_asked

            first = inside(a, allowed, "run")
            second = inside(b, allowed, "run") if b is not None else None
            return compare_asked(first, second, previous, "previous=true")

        return await in_thread(work)

    @server.tool()
    async def runs(ctx: Context, kernel: str | None = None, out: str = OUT, limit: int | None = 20) -> Runs:
        """The earlier runs under the output root, newest first, with status, duration and bottleneck (at most
        `limit`, 200 at most)."""
        allowed = await bound.of(ctx)

        def work() -> Runs:
            from kbench.report.runs import runs as listed

            return Runs(runs=listed(inside(out, allowed, "out"), kernel, min(limit or 200, 200)))

        return await in_thread(work)

    @server.tool()
    async def devlog(ctx: Context, run: str, insights: list[str] | None = None, docs: str = "docs/kernels") -> Logged:
        """Append the run's development-log entry (vs the previous entry of the same mode and parameters) to
        docs/kernels/<kernel>.md; earlier entries are never rewritten."""
        allowed = await bound.of(ctx)

        def work() -> Logged:
            from kbench.report import devlog as log
            from kbench.report.comparison import load_result

            folder = inside(run, allowed, "run")
            path, entry = log.append(load_result(folder), folder, inside(docs, allowed, "docs"), list(insights or []))
            return Logged(path=str(path), entry=entry)

        return await in_thread(work)

    @server.tool()
    async def clone_version(
        ctx: Context, kernel: str, source: str, target: str, kernel_path: str | None = None
    ) -> Cloned:
        """Copy version `source` of a kernel package into a new version `target` (version-named symbols renamed,
        the Triton helper modules it imports copied for it alone); never overwrites. A shipped package is first
        copied into `kernel_path` (default: the server's kernel path, else ./kernels) as my_<pkg>: profile it with
        that package name."""
        allowed = await bound.of(ctx)

        def work() -> Cloned:
            from kbench.plan.clone import clone_version as cloned
            from kbench.plan.discovery import find_package

            given = [str(inside(kernel_path, allowed, "kernel_path"))] if kernel_path else []
            ref = find_package(kernel, paths)
            if ref.folder is not None:
                inside(str(ref.folder), allowed, "kernel package")
            elif not (given or paths):
                inside("kernels", allowed, "kernel_path")  # where a shipped package's copy would go
            done = cloned(kernel, source, target, [*given, *paths])
            where = str(done.copied_to.parent) if done.copied_to is not None else None
            if where is not None and where not in paths:
                paths.append(where)  # the copy is visible to this server's later calls
            return Cloned(path=str(done.path), renamed=done.renamed, package=done.package,
                          edit=[str(done.path), *(str(p) for p in done.own)], shared=list(done.shared),
                          kernel_path=where)  # fmt: skip

        return await in_thread(work)

    return server


def serve(kernel_path: list[str], roots: list[str] | None = None) -> None:
    build(kernel_path, roots).run("stdio")
