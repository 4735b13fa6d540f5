"""Find kernel packages and their versions.

Shipped packages live under ``kbench.kernel``; user packages come from the folders named by
``--kernel-path`` or ``KBENCH_KERNEL_PATH`` (os.pathsep-separated). A package is a folder with an
``__init__.py``; each of its public modules is one version and exports ``PLAN``, a KernelPlan subclass.
The package's ``__init__`` may set ``BASELINE = "<version>"`` (the version speedups are measured against).
Every module of a package is imported through kbench.plan.sources, which loads it again whenever its file's
content changed: a process that profiles twice always runs a version's current source.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import pkgutil
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from kbench.errors import UsageError, first_line
from kbench.plan import sources
from kbench.plan.base import KernelPlan, ParamInfo
from kbench.plan.sources import SHIPPED, USER_NS

log = logging.getLogger(__name__)
DEFAULT_VERSION = "base"


@dataclass(frozen=True)
class PackageRef:
    name: str
    module_name: str  # importable name of the package (user packages are imported on first use)
    origin: str  # "kbench" or the folder it came from
    folder: Path | None = None

    def module(self) -> types.ModuleType:
        """The package module as its files are now (loaded again where one changed)."""
        with sources.LOCK:
            sources.refresh()
            if self.folder is not None:
                _import_user_package(self.folder, self.name, self.module_name)
            return importlib.import_module(self.module_name)

    def versions(self) -> list[str]:
        pkg = self.module()
        names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.ispkg and not m.name.startswith("_")]
        return sorted(names, key=lambda v: (v != DEFAULT_VERSION, len(v), v))

    def baseline(self) -> str:
        return str(getattr(self.module(), "BASELINE", DEFAULT_VERSION))

    def doc(self) -> str:
        doc = self.module().__doc__
        return doc.strip().splitlines()[0] if doc and doc.strip() else ""


def kernel_paths(extra: list[str] | None = None) -> list[Path]:
    raw = list(extra or []) + [p for p in os.environ.get("KBENCH_KERNEL_PATH", "").split(os.pathsep) if p]
    paths: list[Path] = []
    for p in raw:
        path = Path(p).expanduser().resolve()
        if not path.is_dir():
            raise UsageError(f"kernel path {p} is not a folder (from --kernel-path or KBENCH_KERNEL_PATH)")
        if path not in paths:
            paths.append(path)
    return paths


def _user_module_name(folder: Path, name: str) -> str:
    """A private top-level name per folder, so user packages never clash with installed modules or each other."""
    digest = hashlib.sha1(str(folder).encode()).hexdigest()[:10]
    return f"{USER_NS}_{digest}.{name}"


def _import_user_package(folder: Path, name: str, mod_name: str) -> None:
    if mod_name in sys.modules:
        return
    ns_name = mod_name.rsplit(".", 1)[0]
    if ns_name not in sys.modules:
        ns = types.ModuleType(ns_name)
        ns.__path__ = []
        sys.modules[ns_name] = ns
    init = folder / name / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        mod_name,
        init,
        loader=sources.HashedLoader(mod_name, str(init)),
        submodule_search_locations=[str(folder / name)],
    )
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import kernel package {folder / name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[mod_name]  # never leave a half-initialised package behind
        raise UsageError(f"cannot import kernel package {init}: {type(e).__name__}: {first_line(e)}") from None


def shipped() -> list[str]:
    """The names of the kernel packages kbench ships (kbench.kernel's subpackages)."""
    found = importlib.import_module(SHIPPED)
    return [m.name for m in pkgutil.iter_modules(found.__path__) if m.ispkg and not m.name.startswith("_")]


def packages(extra_paths: list[str] | None = None) -> dict[str, PackageRef]:
    """Every kernel package visible: shipped ones, then those on the kernel path (names must not clash)."""
    found = {name: PackageRef(name, f"{SHIPPED}.{name}", "kbench") for name in shipped()}
    for folder in kernel_paths(extra_paths):
        for child in sorted(folder.iterdir()):
            if not (child / "__init__.py").is_file() or child.name.startswith((".", "_")):
                continue
            if child.name in found:
                raise UsageError(
                    f"kernel package '{child.name}' exists both in {found[child.name].origin} and {folder}; rename one"
                )
            found[child.name] = PackageRef(child.name, _user_module_name(folder, child.name), str(folder), folder)
    return dict(sorted(found.items()))


def find_package(name: str, extra_paths: list[str] | None = None) -> PackageRef:
    found = packages(extra_paths)
    if name not in found:
        raise UsageError(
            f"unknown kernel package '{name}'; available: {', '.join(found) or 'none'} "
            "(add your own with --kernel-path or KBENCH_KERNEL_PATH)"
        )
    return found[name]


def load_version(
    package: str, version: str | None = None, extra_paths: list[str] | None = None, like: type | None = None
) -> type[KernelPlan]:
    """The KernelPlan class of ``package`` at ``version`` (default: ``base``, else the first version)."""
    if like is not None:
        # a sibling of an already-loaded plan: same parent module, no rediscovery needed
        root = like.__module__.rsplit(".", 1)[0]
        init = sources.origin(root) if root.startswith(USER_NS) else None
        ref = PackageRef(package, root, "loaded", init.parent.parent if init is not None else None)
    else:
        ref = find_package(package, extra_paths)
    with sources.LOCK:  # the refresh versions() made holds for the import
        versions = ref.versions()
        if not versions:
            raise UsageError(f"kernel package '{package}' has no version modules")
        chosen = version or (DEFAULT_VERSION if DEFAULT_VERSION in versions else versions[0])
        if chosen not in versions:
            raise UsageError(f"unknown version '{chosen}' of {package}; versions: {', '.join(versions)}")
        try:
            module = importlib.import_module(f"{ref.module_name}.{chosen}")
        except Exception as e:  # a broken version module: one line naming it, never a traceback
            raise UsageError(f"cannot import {package} {chosen}: {type(e).__name__}: {first_line(e)}") from None
    plan = getattr(module, "PLAN", None)
    if not (isinstance(plan, type) and issubclass(plan, KernelPlan)):
        raise UsageError(f"{package} {chosen}: the module must export PLAN = <a KernelPlan subclass>")
    if plan.__module__ != module.__name__:  # its identity (package, version) comes from where it is defined
        raise UsageError(f"{package} {chosen}: PLAN must be a class defined in {chosen}.py (subclass to reuse one)")
    return plan


def with_version(plan: KernelPlan, version: str) -> KernelPlan:
    """The same parameters in another version of the plan's package."""
    return load_version(plan.package, version, like=type(plan)).from_values(plan.values())


def current(plan: KernelPlan) -> KernelPlan:
    """``plan`` while its version's source (and that of the package modules it imports) is what its class was made
    from; else the same parameters in the version as its files are now. A plan whose class is not a kernel
    package's (defined in a script or a test) is returned as it is."""
    if not sources.claimed(type(plan).__module__):
        return plan
    cls = load_version(plan.package, plan.version, like=type(plan))
    if cls is type(plan):
        return plan
    log.info(
        "%s %s: its source changed since this plan was made; profiling the current source", plan.package, plan.version
    )
    return cls.from_values(plan.values())


@dataclass(frozen=True)
class VersionInfo:
    version: str
    doc: str  # the plan class's docstring's first paragraph, on one line
    broken: str | None = None  # why it cannot be imported (one line); None when it can


@dataclass(frozen=True)
class PackageInfo:
    name: str
    doc: str
    origin: str
    baseline: str
    versions: list[VersionInfo]
    params: list[ParamInfo]
    broken: str | None = None  # why the package itself cannot be imported


def first_paragraph(doc: str | None) -> str:
    """A docstring's first paragraph on one line (a sentence cut at the line's end would read as a whole one)."""
    return " ".join((doc or "").strip().split("\n\n", 1)[0].split())


def catalogue(extra_paths: list[str] | None = None) -> list[PackageInfo]:
    """Every visible package with its versions and parameters; one that cannot be imported is listed with the
    reason (and so is a broken version), never hiding the rest."""
    out = []
    for name, ref in packages(extra_paths).items():
        try:
            doc, baseline, versions = ref.doc(), ref.baseline(), ref.versions()
        except UsageError as e:
            out.append(PackageInfo(name, "", ref.origin, "", [], [], broken=str(e)))
            continue
        infos: list[VersionInfo] = []
        params: list[ParamInfo] = []
        for v in versions:
            try:
                cls = load_version(name, v, extra_paths)
            except UsageError as e:
                infos.append(VersionInfo(v, "", broken=str(e)))
                continue
            infos.append(VersionInfo(v, first_paragraph(cls.__doc__)))
            if v == (baseline if baseline in versions else versions[0]) or not params:
                params = cls.params()
        out.append(PackageInfo(name, doc, ref.origin, baseline, infos, params))
    return out
