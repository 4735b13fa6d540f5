"""The source every kernel module ran, by content hash; a module whose file changed since is loaded afresh.

A process that profiles more than once (`kbench mcp`, the Python API in a notebook, an in-process sweep, tests)
would otherwise keep the module it imported first, and an agent that edits v9.py and profiles it again would read
the old kernel's report. So the modules of kernel packages (shipped ones under ``kbench.kernel``, user ones under
their private names) are loaded here:

- from their source, never from a ``.pyc``: that check is the file's mtime in whole seconds and its size, which an
  edit of ``num_stages=4`` to ``=3`` within the second passes;
- with ``linecache`` holding the very text compiled, so ``inspect.getsource`` (what Triton's ``@jit`` compiles, and
  what its disk cache is keyed by) reads what ran, not an older text cached under the same mtime and size;
- and before each load, every module loaded here whose file's content changed (or is gone) is dropped from
  ``sys.modules``, with every module that imports it (its import statements, read from the source that ran; an
  ``importlib.import_module`` call is not seen) and every submodule of a dropped package; the next import runs the
  current source and Triton compiles its kernels anew. Unchanged modules stay loaded, their kernels warm.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import logging
import sys
import threading
import types
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SHIPPED = "kbench.kernel"
USER_NS = "kbench_user_kernels"  # + "_<folder digest>.<package>": user packages' private top-level names
LOCK = threading.RLock()  # MCP tools run in threads: one refresh-and-import at a time


@dataclass(frozen=True)
class Ran:
    """A module as loaded here: its file, the sha256 of the bytes compiled, and the absolute module names its
    import statements may name."""

    path: Path
    sha256: str
    imports: frozenset[str]
    module: weakref.ReferenceType[types.ModuleType]


_RAN: dict[str, Ran] = {}


def claimed(name: str) -> bool:
    """Whether ``name`` is a module of a kernel package (not the namespaces themselves, nor their private
    modules such as ``kbench.kernel.__main__``)."""
    if name.startswith(SHIPPED + "."):
        rest = name[len(SHIPPED) + 1 :]
    elif name.startswith(USER_NS + "_") and "." in name:
        rest = name.split(".", 1)[1]
    else:
        return False
    return not rest.startswith("_")


def shown(name: str) -> str:
    """A kernel module's name as a user knows it: ``matmul.v2`` (without kbench's namespaces)."""
    return name.split(".", 1)[1] if name.startswith(USER_NS + "_") else name.removeprefix(SHIPPED + ".")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path: Path) -> str | None:
    try:
        return sha256(path.read_bytes())
    except OSError:
        return None


def imported_names(name: str, tree: ast.Module, is_package: bool) -> frozenset[str]:
    """Every absolute module name the import statements of module ``name`` may name (in functions too), with their
    parents; ``from x import y`` names both x and x.y, since y may be a submodule."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: max(len(parts) - (node.level - 1), 0)])
            mod = ".".join(p for p in (base, node.module or "") if p)
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names if a.name != "*")
    with_parents = {".".join(n.split(".")[:i]) for n in found if n for i in range(1, n.count(".") + 2)}
    return frozenset(with_parents)


def _remember_lines(path: str, data: bytes) -> None:
    """linecache holds the text compiled, never invalidated by the file's stat (mtime None), until the next load."""
    lines = importlib.util.decode_source(data).splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[path] = (len(data), None, lines, path)


class HashedLoader(importlib.machinery.SourceFileLoader):
    """Compiles a kernel module from its source and records what it compiled (see the module's docstring)."""

    _compiled: tuple[str, frozenset[str]] | None = None

    def get_code(self, fullname: str) -> types.CodeType:
        data = self.get_data(self.path)
        tree = ast.parse(data, filename=self.path)
        self._compiled = (sha256(data), imported_names(fullname, tree, self.is_package(fullname)))
        _remember_lines(self.path, data)
        code: types.CodeType = compile(tree, self.path, "exec", dont_inherit=True)
        return code

    def exec_module(self, module: types.ModuleType) -> None:
        super().exec_module(module)
        assert self._compiled is not None
        digest, imports = self._compiled
        _RAN[module.__name__] = Ran(Path(self.path), digest, imports, weakref.ref(module))


class _Finder(importlib.abc.MetaPathFinder):
    """Kernel modules found as Python would find them, loaded by HashedLoader."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is None or not claimed(fullname):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader and spec.origin:
            spec.loader = HashedLoader(fullname, spec.origin)
        return spec


def install() -> None:
    """Kernel modules imported from now on, in any way, load through HashedLoader (idempotent)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _live() -> dict[str, Ran]:
    """The modules loaded here that are still the ones in sys.modules."""
    return {n: r for n, r in _RAN.items() if (m := r.module()) is not None and sys.modules.get(n) is m}


def _parent(name: str) -> str:
    return name.rpartition(".")[0]


def _needs(name: str, ran: Ran, names: set[str]) -> bool:
    """Whether module ``name`` imports one of ``names`` or lies in one of them."""
    return bool(ran.imports & names) or _parent(name) in names


def _initializing(module: types.ModuleType) -> bool:
    """A module still being imported (a version whose body loads another): never dropped from under itself."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def refresh() -> list[str]:
    """Drop from sys.modules every kernel module whose file's content is not what ran (or that was not loaded here:
    its source is unknown), and every module that depends on one; the names dropped, sorted."""
    with LOCK:
        install()
        live = _live()
        stale = {n for n, m in list(sys.modules.items()) if claimed(n) and n not in live and not _initializing(m)}
        stale |= {n for n, r in live.items() if _file_sha256(r.path) != r.sha256}
        if not stale:
            return []
        dropped = set(stale)
        while more := {n for n, r in live.items() if n not in dropped and _needs(n, r, dropped)}:
            dropped |= more
        for name in sorted(dropped, key=lambda n: n.count("."), reverse=True):
            sys.modules.pop(name, None)
            parent = sys.modules.get(_parent(name))
            leaf = name.rpartition(".")[2]
            if parent is not None and isinstance(getattr(parent, leaf, None), types.ModuleType):
                delattr(parent, leaf)  # else `from . import v9` would find the old module on its package
        if changed := sorted(shown(n) for n in stale if n in live):
            log.info("changed on disk, loaded afresh: %s (and what imports them)", ", ".join(changed))
        return sorted(dropped)


def origin(name: str) -> Path | None:
    """The file module ``name`` was last loaded from here."""
    ran = _RAN.get(name)
    return ran.path if ran is not None else None


def _closure(name: str) -> Iterator[str]:
    """``name`` and every module loaded here that it needs: its imports and its parent packages, transitively."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        n = todo.pop()
        if n in seen or n not in _RAN:
            continue
        seen.add(n)
        yield n
        todo.extend([*_RAN[n].imports, _parent(n)])


def digest(files: dict[str, str]) -> str:
    """One name for a set of (file, sha256) pairs: 12 hex digits of the sha256 over them, sorted."""
    return sha256("".join(f"{p} {h}\n" for p, h in sorted(files.items())).encode())[:12]


def _key(name: str) -> str:
    """A kernel module's file as a user names it: ``matmul/_triton.py``, ``xstages/__init__.py``."""
    ran = _RAN[name]
    rest = shown(name).replace(".", "/")
    return f"{rest}/__init__.py" if ran.path.name == "__init__.py" else f"{rest}{ran.path.suffix}"


def record(module: str) -> dict[str, Any] | None:
    """What ran of kernel module ``module`` (a version's): every kernel module it needs (its closure: the package's
    ``__init__``, the helpers it imports, shipped ones too) by the sha256 of the bytes compiled, keyed by file as a
    user names it; None for a module not loaded here."""
    if module not in _RAN:
        return None
    files = {_key(n): _RAN[n].sha256 for n in _closure(module)}
    return {"module": _key(module), "files": dict(sorted(files.items())), "digest": digest(files)}
