"""`kbench clone <pkg> <from> <to>`: a version module copied into the next one, its version-named symbols renamed.

A symbol is renamed when the module itself defines it at top level (a function, a Triton kernel, a class, an
assignment) and one of its name's words is the old version: ``mla_v1_kernel`` -> ``mla_v2_kernel``,
``MlaDecodeV1`` -> ``MlaDecodeV2``, ``V1_TILES`` -> ``V2_TILES``. Every use of such a symbol in the module follows
(names, and the same word inside strings, e.g. a stage's ``kernels=["mla_v1_kernel"]``), and the module docstring's
"<pkg> <from>" becomes "<pkg> <to>". Imported names and local variables are never touched, so the clone imports
what the original imports. An existing module is never overwritten.
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from kbench.errors import UsageError

VERSION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Cloned:
    path: Path
    renamed: dict[str, str]  # old symbol -> new symbol


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


def clone(package_dir: Path, package: str, old: str, new: str) -> Cloned:
    """Write ``<package_dir>/<new>.py`` from ``<old>.py``; refuses a bad or taken version name."""
    if not VERSION_NAME.match(new) or keyword.iskeyword(new):
        raise UsageError(f"'{new}' cannot be a version: use lower-case letters, digits and _ (a module name)")
    src, dst = package_dir / f"{old}.py", package_dir / f"{new}.py"
    if not src.is_file():
        raise UsageError(f"{package} has no version '{old}' ({src} not found)")
    if dst.exists():
        raise UsageError(f"{dst} exists; kbench clone never overwrites a version (choose another name)")
    text, renames = clone_source(src.read_text(), package, old, new)
    ast.parse(text)  # what is written always parses
    try:
        with dst.open("x") as f:  # "x": never overwrite, even if it appeared meanwhile
            f.write(text)
    except OSError as e:
        raise UsageError(f"cannot write {dst}: {e.strerror}") from None
    return Cloned(dst, renames)


def clone_version(package: str, old: str, new: str, kernel_path: list[str] | None = None) -> Cloned:
    """Clone a version of a visible kernel package (shipped or on the kernel path), then import the clone once to
    check it registers; a clone that does not is removed again (one line says why)."""
    import importlib

    from kbench.plan.discovery import find_package, load_version

    ref = find_package(package, kernel_path)
    folder = ref.folder / package if ref.folder is not None else Path(ref.module().__path__[0])
    if old not in ref.versions():
        raise UsageError(f"unknown version '{old}' of {package}; versions: {', '.join(ref.versions())}")
    done = clone(folder, package, old, new)
    importlib.invalidate_caches()
    try:
        load_version(package, new, kernel_path)
    except UsageError as e:
        done.path.unlink(missing_ok=True)
        raise UsageError(f"the clone did not register, so {done.path} was removed: {e}") from None
    return done
