"""`kbench clone <pkg> <from> <to>`: a version module copied into the next one, its version-named symbols renamed.

A symbol is renamed when the module itself defines it at top level (a function, a Triton kernel, a class, an
assignment) and one of its name's words is the old version: ``mla_v1_kernel`` -> ``mla_v2_kernel``,
``MlaDecodeV1`` -> ``MlaDecodeV2``, ``V1_TILES`` -> ``V2_TILES``. Every use of such a symbol in the module follows
(names, and the same word inside strings, e.g. a stage's ``kernels=["mla_v1_kernel"]``), and the module docstring's
"<pkg> <from>" becomes "<pkg> <to>". Imported names and local variables are never touched, so the clone imports
what the original imports. An existing module is never overwritten.

The new version gets its own kernel source: each helper module of the package it imports that holds Triton kernels
(``_triton.py``) is copied beside it as ``_triton_<to>.py`` and the clone imports that copy, so editing it changes
the new version alone. A shipped package is never written into: it is first copied into the user's kernel path as
``my_<pkg>`` (its imports of ``kbench.kernel.<pkg>`` made relative), and the clone is made there.
"""

from __future__ import annotations

import ast
import io
import keyword
import os
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbench.errors import UsageError
from kbench.fsutil import default_here, write_target
from kbench.plan.sources import SHIPPED

VERSION_NAME = re.compile(r"[a-z][a-z0-9_]*")  # matched whole (fullmatch): no trailing newline slips through
VERSION_CHARS = 64  # room for the helper copies' names (_triton_<version>.py) under any file system's name limit


@dataclass(frozen=True)
class Cloned:
    path: Path
    renamed: dict[str, str]  # old symbol -> new symbol
    package: str = ""  # the package the clone is in (a shipped one's copy: my_<pkg>)
    own: tuple[Path, ...] = ()  # the kernel source copied for the new version alone (``_triton_<to>.py``)
    shared: tuple[str, ...] = ()  # other modules of its package it imports (shared with the other versions)
    copied_to: Path | None = None  # where a shipped package was copied first (None: the clone is in place)


def _words(name: str) -> list[str]:
    """An identifier's words: snake_case parts, each split further at CamelCase humps (V1, Base, MLA)."""
    out: list[str] = []
    for part in re.split(r"(_+)", name):
        out.extend(p for p in re.findall(r"_+|[A-Z]+[a-z0-9]*|[a-z0-9]+", part) if p)
    return out


def _swap(word: str, old: str, new: str) -> str:
    if word == old:
        return new
    if word == old.upper():
        return new.upper()
    if word == old.capitalize():
        return new[:1].upper() + new[1:]
    return word


def renamed_symbol(name: str, old: str, new: str) -> str:
    """``name`` with each word that is the version ``old`` (in its case style) replaced by ``new``."""
    parts = _words(name)
    if "".join(parts) != name:  # a shape the split does not reproduce exactly: left alone
        return name
    return "".join(_swap(w, old, new) for w in parts)


def defined_names(source: str) -> list[str]:
    """Names the module defines at top level."""
    names: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.extend(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def clone_source(source: str, package: str, old: str, new: str) -> tuple[str, dict[str, str]]:
    """The new module's text and what was renamed (edits made in place: layout and comments unchanged)."""
    renames = {n: r for n in dict.fromkeys(defined_names(source)) if (r := renamed_symbol(n, old, new)) != n}
    word = re.compile(r"\b(" + "|".join(map(re.escape, sorted(renames, key=len, reverse=True))) + r")\b")
    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    seen_code = False
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        text = tok.string
        if tok.type == tokenize.NAME and text in renames:
            text = renames[text]
        elif tok.type == tokenize.STRING:
            if renames:
                text = word.sub(lambda m: renames[m.group(1)], text)
            if not seen_code:  # the module docstring names the version
                text = re.sub(rf"\b{re.escape(package)} {re.escape(old)}\b", f"{package} {new}", text, count=1)
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING):
            seen_code = True
        if text != tok.string:
            edits.append((tok.start, tok.end, text))
    lines = source.splitlines(keepends=True)
    for (r0, c0), (r1, c1), text in reversed(edits):
        head, tail = lines[r0 - 1][:c0], lines[r1 - 1][c1:]
        lines[r0 - 1 : r1] = [head + text + tail]
    return "".join(lines), renames


def imported_modules(source: str, package: str) -> list[str]:
    """The modules of its own package a version imports (``from ._triton import``, ``from .v5 import``,
    ``from kbench.kernel.<package>._triton import``), in order."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        prefix = f"{SHIPPED}.{package}."
        if node.level == 1:
            out.append(node.module)
        elif node.level == 0 and node.module.startswith(prefix):
            out.append(node.module.removeprefix(prefix))
    return list(dict.fromkeys(m for m in out if "." not in m))


def own_kernels(package_dir: Path, source: str, package: str, old: str, new: str) -> tuple[str, list[Path], list[str]]:
    """The new version's source importing its own copies of the helper modules that hold Triton kernels; the copies
    written, and the package's other modules it imports (shared)."""
    own: list[Path] = []
    shared: list[str] = []
    for mod in imported_modules(source, package):
        path = package_dir / f"{mod}.py"
        if not (mod.startswith("_") and path.is_file() and "triton.jit" in path.read_text()):
            shared.append(f"{mod}.py")
            continue
        copy = package_dir / f"{mod.removesuffix(f'_{old}')}_{new}.py"  # a clone's own _triton_v3 -> _triton_v4
        try:
            with copy.open("x") as f:
                f.write(path.read_text())
        except FileExistsError:
            raise UsageError(f"{copy} exists; kbench clone never overwrites (choose another version name)") from None
        own.append(copy)
        pattern = rf"^(\s*from\s+)(\.|{re.escape(SHIPPED)}\.{re.escape(package)}\.){re.escape(mod)}(\s+import\b)"
        source = re.sub(pattern, rf"\g<1>.{copy.stem}\g<3>", source, flags=re.M)
    return source, own, shared


def version_name(new: str) -> None:
    """UsageError unless ``new`` can be a version (a module name of at most VERSION_CHARS characters)."""
    if len(new) > VERSION_CHARS:
        raise UsageError(
            f"a version name of {len(new)} characters is too long: at most {VERSION_CHARS} (a module name)"
        )
    if not VERSION_NAME.fullmatch(new) or keyword.iskeyword(new):
        raise UsageError(f"{new!r} cannot be a version: use lower-case letters, digits and _ (a module name)")


def clone(package_dir: Path, package: str, old: str, new: str) -> Cloned:
    """Write ``<package_dir>/<new>.py`` from ``<old>.py``; refuses a bad or taken version name."""
    version_name(new)
    src, dst = package_dir / f"{old}.py", package_dir / f"{new}.py"
    if not src.is_file():
        raise UsageError(f"{package} has no version '{old}' ({src} not found)")
    if dst.exists():
        raise UsageError(f"{dst} exists; kbench clone never overwrites a version (choose another name)")
    text, renames = clone_source(src.read_text(), package, old, new)
    ast.parse(text)  # what is written always parses
    text, own, shared = own_kernels(package_dir, text, package, old, new)
    try:
        with dst.open("x") as f:  # "x": never overwrite, even if it appeared meanwhile
            f.write(text)
    except OSError as e:
        for p in own:
            p.unlink(missing_ok=True)
        raise UsageError(f"cannot write {dst}: {e.strerror}") from None
    return Cloned(dst, renames, package, tuple(own), tuple(shared))


COPY = "my_"  # a shipped package's copy in the user's kernel path is my_<package>


def copied_from(package: str) -> str | None:
    """The shipped package whose copy ``package`` is (``my_<pkg>``, as copy_shipped names it); None for any other:
    a copy's first runs compare with the runs of the package it was copied from."""
    from kbench.plan.discovery import shipped

    origin = package.removeprefix(COPY)
    return origin if package.startswith(COPY) and origin in shipped() else None


def copy_shipped(package_dir: Path, package: str, dest: Path) -> Path:
    """A shipped package's modules copied into ``dest/my_<package>`` (never over an existing one), their imports of
    ``kbench.kernel.<package>`` made relative and their docstrings naming the copy."""
    name = f"{COPY}{package}"
    target = dest / name
    if target.exists():
        raise UsageError(
            f"{target} exists (an earlier copy of {package}): clone its versions there, e.g. "
            f"`kbench clone {name} <from> <to> --kernel-path {dest}`"
        )
    target.mkdir(parents=True)
    for src in sorted(package_dir.glob("*.py")):
        text = src.read_text()
        text = re.sub(
            rf"\bfrom\s+{re.escape(SHIPPED)}\.{re.escape(package)}\.(\w+)\s+import\b", r"from .\1 import", text
        )
        text = re.sub(rf"\bfrom\s+{re.escape(SHIPPED)}\.{re.escape(package)}\s+import\b", "from . import", text)
        text = re.sub(rf'^(\s*"""){re.escape(package)}\b', rf"\g<1>{name}", text, count=1)
        (target / src.name).write_text(text)
    return target


def _make_destination(package: str, kernel_path: list[str], allowed: Callable[[Path], object]) -> None:
    """The first --kernel-path is where a shipped package's copy goes: the user's own destination, made when it is
    not there yet (as ./kernels is); for a user package nothing is made (its kernel path must exist)."""
    from kbench.plan.discovery import find_package

    if not kernel_path or Path(kernel_path[0]).expanduser().exists():
        return
    try:
        shipped = find_package(package, kernel_path[1:]).folder is None
    except UsageError:
        return  # not found without it: the line naming the missing kernel path follows
    if shipped:
        allowed(Path(kernel_path[0]).expanduser())  # before anything is made
        write_target(Path(kernel_path[0]), "kernel path")
        try:
            Path(kernel_path[0]).expanduser().mkdir(parents=True)
        except OSError as e:
            raise UsageError(f"cannot make kernel path {kernel_path[0]}: {e.strerror}") from None


def named_kernel_path(kernel_path: list[str] | None) -> list[str]:
    """The kernel path as named (--kernel-path, then KBENCH_KERNEL_PATH), before discovery resolves its links."""
    return [*(kernel_path or []), *(p for p in os.environ.get("KBENCH_KERNEL_PATH", "").split(os.pathsep) if p)]


def destination(kernel_path: list[str] | None) -> Path:
    """Where a shipped package's copy goes, as named: the first kernel path, else ./kernels (never in kbench's own
    checkout or package unless named: fsutil.default_here)."""
    named = named_kernel_path(kernel_path)
    return Path(named[0]).expanduser() if named else default_here("kernels", "--kernel-path")


def clone_version(
    package: str, old: str, new: str, kernel_path: list[str] | None = None, allowed: Callable[[Path], object] = Path
) -> Cloned:
    """Clone a version of a visible kernel package, then import the clone once to check it registers; what a clone
    that does not register wrote is removed again (one line says why). A user package is cloned in place; a shipped
    one is copied into the kernel path first (``destination``: the first folder of ``kernel_path``/
    KBENCH_KERNEL_PATH, else ./kernels, made if needed) as my_<package>, and cloned there. No folder written into is
    a symbolic link or reached through one out of the folder it is named in. ``allowed`` sees the folder written
    into and the version read before either is touched, and raises to refuse one (``kbench mcp``'s roots)."""
    import importlib
    import shutil

    from kbench.plan.discovery import find_package, load_version

    _make_destination(package, kernel_path or [], allowed)
    ref = find_package(package, kernel_path)
    if old not in ref.versions():
        raise UsageError(f"unknown version '{old}' of {package}; versions: {', '.join(ref.versions())}")
    paths = list(kernel_path or [])
    copied: Path | None = None
    if ref.folder is None:  # shipped: never written into; a copy in the user's kernel path instead
        named = destination(kernel_path)
        dest = named.resolve()
        version_name(new)  # before anything is copied
        allowed(dest / f"{COPY}{package}")
        write_target(named, "kernel path")
        try:
            copied = copy_shipped(Path(ref.module().__path__[0]), package, dest)
        except OSError as e:
            raise UsageError(f"cannot copy {package} into {dest}: {e.strerror}") from None
        folder, name, paths = copied, copied.name, [str(dest), *paths]
    else:
        folder, name = ref.folder / package, package
        allowed(folder)
        allowed(folder / f"{old}.py")
        for entry in named_kernel_path(kernel_path):  # the kernel path it was found in, as named
            if Path(entry).expanduser().resolve() == ref.folder:
                write_target(Path(entry).expanduser(), "kernel path")
        write_target(folder, "the package folder")
    try:
        done = clone(folder, name, old, new)
    except UsageError:
        if copied is not None:
            shutil.rmtree(copied, ignore_errors=True)
        raise
    importlib.invalidate_caches()
    try:
        load_version(name, new, paths)
    except UsageError as e:
        for p in (done.path, *done.own):
            p.unlink(missing_ok=True)
        if copied is not None:
            shutil.rmtree(copied, ignore_errors=True)
        raise UsageError(f"the clone did not register, so {done.path} was removed: {e}") from None
    return Cloned(done.path, done.renamed, name, done.own, done.shared, copied)
