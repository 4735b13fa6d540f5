"""`kbench mcp`: kbench's commands as MCP tools (stdio), for coding agents, on the official `mcp` SDK (2.x).

Each tool is the same function the CLI command calls, with a structured (schema'd) answer (kbench.cli.mcp_answers:
bounded). A kbench error comes back as a tool error carrying its one line, bad arguments too; anything else as a tool
error naming it a kbench bug, never a traceback. Every path a tool reads or writes passes the fence
(kbench.cli.mcp_fence) once joined. Profiling reports progress (one notification per step the pipeline announces).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import Field, ValidationError

from kbench.cli.mcp_answers import (
    ANSWER_CHARS,
    MD_CHARS,
    Checked,
    Cloned,
    Compared,
    Kernels,
    Logged,
    ReportText,
    RunDone,
    Runs,
    bad_arguments,
    cloned,
    compared,
    done,
    fitted,
    kernels,
    logged,
    one_line_errors,
    page,
)
from kbench.cli.mcp_fence import Roots, Value, check_argv, check_names, plan_values
from kbench.cli.mcp_json_pages import json_page
from kbench.modes import registry
from kbench.version import __version__

__all__ = ["ANSWER_CHARS", "INSTRUCTIONS", "PROFILE", "build", "serve"]
R = TypeVar("R")
OUT = "out/profiles"
INSTRUCTIONS = (
    "kbench profiles GPU kernel plans (Triton/PyTorch) against the device roofline. Loop: list_kernels -> "
    "profile (on a GPU: event mode first, annotation for counters; on a machine without a GPU: check, and profile "
    "in access mode, which predicts for a device) -> read_report -> change the kernel (clone_version for the next "
    "version) -> profile it -> compare (with previous=true) -> devlog. Every number in report.json says whether it "
    "was measured, analytic or derived; Top 3 gains are estimated against measured ceilings."
)

PROFILE = (
    "Profile a kernel version on this machine's GPU (params as in `--name=value`, defaults otherwise) in a mode: "
    + "; ".join(f"{name}: {what}" for name, what in registry.SUMMARY.items())
    + ". Returns the run folder, report.md and report.json; reports progress as it goes. Needs a CUDA GPU (and ncu "
    "for annotation/ncu, nsys for nsys), except access mode, which runs on the CPU and predicts for `device` (a key of "
    "conf/devices.json; default this machine's GPU, else H100_SXM)."
)
Params = dict[str, Value] | None  # plan parameters: {"n": 4096} or {"n": "4096"}, as `--n=4096`
# the profile tool's modes, listed in its schema from the one registry (an unknown one: registry.get's one line)
Mode = Annotated[
    str, Field(description=f"one of {', '.join(registry.names())}", json_schema_extra={"enum": registry.names()})
]


class Server(MCPServer):
    """The SDK's server, whose errors for arguments that fail a tool's schema come back as one line too."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e, UnexpectedToolError) or not isinstance(e.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {bad_arguments(e.__cause__.errors())}") from e.__cause__


def _plan(kernel: str, version: str | None, params: Params, kernel_path: list[str]) -> Any:
    from kbench.cli.common import PlanArgs, load_plan

    return load_plan(PlanArgs(kernel, version, plan_values(params)), kernel_path)


def build(
    kernel_path: list[str] | None = None, roots: list[str] | None = None, fallback: list[str] | None = None
) -> MCPServer:
    """The server, its tools bound to ``kernel_path`` (user kernel folders, besides KBENCH_KERNEL_PATH); file access
    bounded by ``roots`` (``--root``), else by the client's MCP roots, else by ``fallback`` (see ``Roots``)."""
    paths = list(kernel_path or [])
    bound = Roots(list(roots or []), fallback)
    server = Server("kbench", version=__version__, instructions=INSTRUCTIONS)

    async def in_thread(work: Callable[[], R]) -> R:
        return await anyio.to_thread.run_sync(one_line_errors(work))

    @server.tool()
    @one_line_errors
    def list_kernels() -> Kernels:
        """Every kernel package: its versions (the baseline named), and its parameters with defaults, choices and
        ranges (ge, le)."""
        return kernels(paths)

    @server.tool(description=PROFILE)
    async def profile(
        ctx: Context,
        kernel: str,
        version: str | None = None,
        params: Params = None,
        mode: Mode = registry.DEFAULT,
        out: str = OUT,
        bench_runs: int | None = None,
        device: str | None = None,
    ) -> RunDone:
        """PROFILE (the tool's description)."""
        steps = iter(range(1, 1 << 30))
        fence = await bound.of(ctx)

        def step(message: str) -> None:  # called from the worker thread the pipeline runs in
            anyio.from_thread.run(ctx.report_progress, next(steps), None, message)

        def work() -> RunDone:
            import dataclasses

            from kbench import pipeline
            from kbench.modes.base import RunOptions

            backend = registry.get(mode)  # an unknown mode: one line naming the known ones
            root = fence.inside(out, "out")  # the run folder is made inside it (kbench.report.folder.new_run_dir)
            plan = _plan(kernel, version, params, paths)
            runs = bench_runs if bench_runs is not None else backend.default_bench_runs
            named = {"device": device} if device is not None else {}  # access mode: the device to predict for
            opts = dataclasses.replace(RunOptions.for_api(root, runs, **named), progress=step)
            return done(pipeline.profile(mode, plan, opts))

        return await in_thread(work)

    @server.tool()
    async def check(kernel: str, version: str | None = None, params: Params = None, access: bool = False) -> Checked:
        """`kbench check`: the plan's correctness against its reference for every tuning configuration (of every
        version when none is named), on this machine's GPU, or without one under Triton's CPU interpreter at the
        plan's small check sizes (bf16 as fp16/fp32, said so); there every load and store is traced: an access out of
        bounds fails it, naming the line, and `access` adds each load/store line's facts (bytes, masked lanes, stride,
        bytes used per 32-byte sector, reuse). Runs in its own process; it touches no file the client names."""

        def work() -> Checked:
            import tempfile

            from kbench.capture import tools
            from kbench.errors import KbenchError

            check_names(kernel, version, params or {}, paths)
            argv = check_argv(kernel, version, params or {}, paths, access)
            with tempfile.TemporaryDirectory(prefix="kbench-check-") as tmp:
                ran = tools.run(argv, timeout_s=1800, log_path=Path(tmp) / "check.log")
            if ran.returncode not in (0, 5):  # 5: the check ran and a configuration failed, an answer; else an error
                said = [line for line in ran.log.splitlines() if line.startswith("kbench: error: ")]
                raise KbenchError(
                    said[-1].removeprefix("kbench: error: ") if said else f"kbench check exited {ran.returncode}"
                )
            text, _ = page(ran.log, max(0, len(ran.log) - MD_CHARS), MD_CHARS)
            return Checked(passed=ran.returncode == 0, exit_code=ran.returncode, output=text)

        return await in_thread(work)

    @server.tool()
    async def analyze(
        ctx: Context,
        capture: str,
        mode: Literal["annotation", "ncu"] | None = None,
        plan: str | None = None,
        plan_version: str | None = None,
        params: Params = None,
        out: str = OUT,
    ) -> RunDone:
        """The reports of an existing capture (.ncu-rep, nsys .sqlite, PyTorch-profiler .json, Proton .hatchet), no
        GPU needed; with `plan` its stages and FLOP/byte model are used. A run's own report.json is no capture:
        read_report reads it."""
        fence = await bound.of(ctx)

        def work() -> RunDone:
            from kbench import metric_libraries, pipeline

            metric_libraries.claim()  # a server that profiles later samples with CUPTI's metric library, not ncu's
            path = fence.inside(capture, "capture")
            root = fence.inside(out, "out")  # the run folder is made inside it (kbench.report.folder.new_run_dir)
            registry.for_capture(path, mode)
            the_plan = _plan(plan, plan_version, params, paths) if plan else None
            return done(pipeline.analyze(path, mode, root, the_plan, paths))  # params.json's plan: from paths too

        return await in_thread(work)

    @server.tool()
    async def read_report(
        ctx: Context,
        run: str,
        format: Literal["md", "json"] = "md",
        offset: int = 0,
        max_chars: int = ANSWER_CHARS,
        part: str | None = None,
    ) -> ReportText:
        """A run folder's report.md, from character `offset`, at most `max_chars` characters; or its report.json
        (every number with its source) in pages of valid JSON: each a JSON object holding whole values of report.json
        (`parts`: their JSON pointers, each at the same pointer in the page; a value too long for a page is split
        into its members), from the `offset`-th part; `part` (a JSON pointer, /stages/0, or a top-level entry's name,
        top3) reads one value alone, paged alike. Bounded; `next_offset` says where the rest starts, `more` where
        each entry does."""
        fence = await bound.of(ctx)

        def work() -> ReportText:
            from kbench.errors import UsageError
            from kbench.report import folder

            name = "report.md" if format == "md" else folder.REPORT_JSON
            path = fence.inside(fence.inside(run, "run") / name, "report")
            if not path.is_file():
                raise UsageError(f"{run} has no {name}: name the folder of a finished run (see the runs tool)")
            whole = fence.read_text(path, "report")
            if format == "json":
                return json_page(run, whole, offset, max_chars, part)
            if part is not None:
                raise UsageError("part reads a value of report.json: give format='json' with it")
            text, rest = page(whole, offset, max_chars)
            return ReportText(
                run=run, format=format, text=text, offset=offset, total_chars=len(whole), next_offset=rest
            )

        return await in_thread(work)

    @server.tool()
    async def compare(ctx: Context, a: str, b: str | None = None, previous: bool = False) -> Compared:
        """Two finished runs side by side (a the baseline), or a run and its previous one of the same mode, kernel
        and parameters (previous=true): changes with 'within noise' where the IQRs overlap, and what differs."""
        fence = await bound.of(ctx)

        def work() -> Compared:
            from kbench.report.comparison import compare_asked
            from kbench.report.folder import RESULT

            first = fence.inside(a, "run")
            second = fence.inside(b, "run") if b is not None else None
            for run in (first, second):
                if run is not None:
                    fence.inside(run / RESULT, "run")  # the file read, not only its folder
            # previous=true: the folder searched (beside a) and the run found are fenced too
            two = f"compare(a=<the run to compare with>, b={a!r})"
            return compared(
                compare_asked(first, second, previous, "previous=true", lambda p: fence.inside(p, "run"), two)
            )

        return await in_thread(work)

    @server.tool()
    async def runs(
        ctx: Context, kernel: str | None = None, out: str = OUT, limit: int | None = 20, offset: int = 0
    ) -> Runs:
        """The earlier runs under the output root, newest first (from the `offset`-th), with status, duration and
        bottleneck: at most `limit` (200 at most), fewer where the answer would pass its bound (`more` says)."""
        fence = await bound.of(ctx)

        def work() -> Runs:
            from kbench.errors import UsageError
            from kbench.report.runs import runs as listed

            if offset < 0 or (limit is not None and limit < 1):
                raise UsageError(f"offset {offset} and limit {limit}: offset 0 or more, limit 1 or more")
            every = listed(fence.inside(out, "out"), kernel)  # params.json and result.json never read through a link
            shown = Runs(runs=every[offset : offset + min(limit or 200, 200)])
            return fitted(shown, "runs", "runs", len(every), offset, hint=": runs(offset={next}) lists the next")

        return await in_thread(work)

    @server.tool()
    async def devlog(ctx: Context, run: str, insights: list[str] | None = None, docs: str | None = None) -> Logged:
        """Append the run's development-log entry (vs the previous entry of the same mode and parameters) to
        <docs>/<kernel>.md (default docs/kernels in the server's folder; name `docs` when that is kbench's own
        checkout); earlier entries are never rewritten."""
        fence = await bound.of(ctx)

        def work() -> Logged:
            from kbench.report import devlog as log
            from kbench.report.folder import RESULT
            from kbench.report.models import load_result

            folder = fence.inside(run, "run")
            fence.inside(folder / RESULT, "run")
            result = load_result(folder)
            where = fence.inside(docs if docs is not None else log.default_docs(), "docs")
            fence.inside(where / f"{result.kernel}.md", "devlog")  # the file appended to (kbench.report.devlog)
            path, entry = log.append(result, folder, where, list(insights or []))
            return logged(str(path), entry)

        return await in_thread(work)

    @server.tool()
    async def clone_version(
        ctx: Context, kernel: str, source: str, target: str, kernel_path: str | None = None
    ) -> Cloned:
        """Copy version `source` of a kernel package into a new version `target` (version-named symbols renamed,
        the Triton helper modules it imports copied for it alone); never overwrites. A shipped package is first
        copied into `kernel_path` (default: the server's kernel path, else ./kernels) as my_<pkg>. Answers the files to
        edit, the profile tool's arguments for the new version (`profile`) and the calls that follow (`next`)."""
        fence = await bound.of(ctx)

        def work() -> Cloned:
            from kbench.plan.clone import clone_version as clone

            given = [str(fence.inside(kernel_path, "kernel_path"))] if kernel_path else []
            made = clone(kernel, source, target, [*given, *paths], lambda p: fence.inside(p, "kernel package"))
            where = str(made.copied_to.parent) if made.copied_to is not None else None
            if where is not None and where not in paths:
                paths.append(where)  # the copy is visible to this server's later calls
            return cloned(made, source, target, where)

        return await in_thread(work)

    return server


def serve(kernel_path: list[str], roots: list[str] | None = None) -> None:
    """`kbench mcp`: without --root and client roots, the tools reach the folder it was started in and below."""
    build(kernel_path, roots, fallback=[str(Path.cwd())]).run("stdio")
