"""`kbench mcp`'s fence: the folders its tools may reach (`kbench mcp --root DIR`, else the client's MCP roots, else
the folder the server was started in), each path checked once it is joined and resolved (the file a tool reads or
writes, not only the folder it was named by), files inside roots read without following a link swapped in after the
check; and tool arguments put on `kbench check`'s command line as data, never as its options."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mcp.server.mcpserver import Context

from kbench.errors import UsageError
from kbench.fsutil import read_beneath, read_nofollow

Value = str | int | float | bool  # a plan parameter's value as a tool argument


# how a refusal says the roots can be widened, by where they came from (Roots.of)
WIDEN = {
    "--root": "to reach it, add its folder to the server's command (`kbench mcp --root DIR`, once per folder)",
    "client": "to reach it, add its folder to the client's MCP roots, or start the server with `kbench mcp --root DIR` "
    "(which takes their place)",
    "started in": "the client declares no MCP roots, so the server reaches the folder it was started in: to reach it, "
    "start the server with `kbench mcp --root DIR` (once per folder) or declare MCP roots in the client",
}


class Fence:
    """The roots one tool call may reach; None: anywhere (a server built in-process without bounds: Roots).
    ``source``: where they came from (a key of WIDEN), which the refusal names to say how to widen them."""

    def __init__(self, roots: list[Path] | None, source: str = "--root") -> None:
        self.roots = roots
        self.source = source

    def _root(self, path: str | Path, what: str) -> tuple[Path, Path] | None:
        """``path`` resolved (``..`` and symbolic links followed) and the root it lies in; None without roots."""
        if self.roots is None:
            return None
        real = (Path.cwd() / Path(path).expanduser()).resolve()
        for r in self.roots:
            if real == r or real.is_relative_to(r):
                return real, r
        raise UsageError(
            f"{what} {path} is outside the roots this MCP client allows ({', '.join(map(str, self.roots))}); "
            f"name a path inside them; {WIDEN[self.source]}"
        )

    def inside(self, path: str | Path, what: str) -> Path:
        """``path`` as given (relative to the server's folder), refused with one line when it leads outside the
        roots: call it on every path a tool reads or writes, once joined (a run folder's file, not only the folder)."""
        self._root(path, what)
        return Path(path).expanduser()

    def read_text(self, path: Path, what: str) -> str:
        """The file ``path`` once ``inside`` allows it; inside roots read down from its root without following any
        link (one swapped in after the check is refused, not followed)."""
        found = self._root(path, what)
        try:
            data = read_nofollow(path) if found is None else read_beneath(found[1], found[0])
            return data.decode(errors="replace")
        except OSError as e:
            raise UsageError(f"cannot read {what} {path}: {e.strerror or e}") from None


class Roots:
    """The folders file access may reach: ``kbench mcp --root DIR``, else the client's MCP roots when it declares
    them, else ``fallback`` (`kbench mcp`: the folder it was started in, since many clients declare no roots;
    None: anywhere, for a server built in-process by code that bounds it itself)."""

    def __init__(self, fixed: list[str], fallback: list[str] | None = None) -> None:
        self.fixed = [Path(r).expanduser().resolve() for r in fixed]
        self.fallback = None if fallback is None else [Path(r).expanduser().resolve() for r in fallback]

    async def of(self, ctx: Context) -> Fence:
        if self.fixed:
            return Fence(self.fixed, "--root")
        import inspect
        import warnings
        from urllib.parse import unquote, urlparse

        from mcp import types
        from mcp.shared.exceptions import MCPDeprecationWarning, NoBackChannelError

        session = ctx.session
        with warnings.catch_warnings():  # roots are deprecated in the 2026-07-28 protocol (SEP-2577), still sent
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if not session.check_client_capability(types.ClientCapabilities(roots=types.RootsCapability())):
                return Fence(self.fallback, "started in")
            try:
                listed = session.list_roots()
                if inspect.isawaitable(listed):
                    listed = await listed
            except NoBackChannelError:  # a transport that cannot ask the client (in-process, modern protocol)
                return Fence(self.fallback, "started in")
        return Fence([Path(unquote(urlparse(str(r.uri)).path)).resolve() for r in listed.roots], "client")


def plan_values(params: Mapping[str, Value] | None) -> dict[str, str]:
    """Tool parameters as the command line writes them (``--name=value``): numbers as typed, booleans true/false."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (params or {}).items()}


def check_names(kernel: str, version: str | None, params: Mapping[str, Value], kernel_path: list[str]) -> None:
    """UsageError unless ``kernel`` is a visible package, ``version`` one of its versions and every key of ``params``
    a parameter of it (of any of its versions when none is named): what the CLI takes from a user, checked before
    any of it reaches a command line."""
    from kbench.plan.discovery import find_package, load_version

    versions = find_package(kernel, kernel_path).versions()
    if version is not None and version not in versions:
        raise UsageError(f"unknown version {version!r} of {kernel}; versions: {', '.join(versions)}")
    known: set[str] = set()
    for v in [version] if version else versions:
        try:
            known |= {p.name for p in load_version(kernel, v, kernel_path).params()}
        except UsageError:
            if version:
                raise  # a version no check can import: its own line (every version: the check skips it)
    if unknown := sorted(k for k in params if k.replace("-", "_") not in known):
        raise UsageError(f"unknown parameter {unknown[0]!r} of {kernel}; its parameters: {', '.join(sorted(known))}")


def check_argv(
    kernel: str, version: str | None, params: Mapping[str, Value], kernel_path: list[str], access: bool
) -> list[str]:
    """`kbench check`'s command line: the server's own options, then ``--`` (the end of options), then the kernel,
    its version and its parameters, so that nothing a client sends is read as an option (--kernel-path, ...)."""
    from kbench.capture.tools import python_module

    argv = ["check", *(f"--kernel-path={k}" for k in kernel_path), *(["--access"] if access else [])]
    argv += ["--", kernel, *([version] if version else []), *(f"--{k}={v}" for k, v in plan_values(params).items())]
    return python_module("kbench", *argv)
