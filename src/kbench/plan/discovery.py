"""Find kernel packages and their versions.

Shipped packages live under ``kbench.kernel``; user packages come from the folders named by
``--kernel-path`` or ``KBENCH_KERNEL_PATH`` (os.pathsep-separated). A package is a folder with an
``__init__.py``; each of its public modules is one version and exports ``PLAN``, a KernelPlan subclass.
The package's ``__init__`` may set ``BASELINE = "<version>"`` (the version speedups are measured against).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from kbench.errors import UsageError
from kbench.plan.base import KernelPlan

SHIPPED = "kbench.kernel"
USER_NS = "kbench_user_kernels"
DEFAULT_VERSION = "base"


@dataclass(frozen=True)
class PackageRef:
    name: str
    module: str  # importable module name of the package
    origin: str  # "kbench" or the folder it came from

    def versions(self) -> list[str]:
        pkg = importlib.import_module(self.module)
        names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.ispkg and not m.name.startswith("_")]
        return sorted(names, key=lambda v: (v != DEFAULT_VERSION, len(v), v))

    def baseline(self) -> str:
        pkg = importlib.import_module(self.module)
        return str(getattr(pkg, "BASELINE", DEFAULT_VERSION))

    def doc(self) -> str:
        pkg = importlib.import_module(self.module)
        return (pkg.__doc__ or "").strip().splitlines()[0] if pkg.__doc__ else ""


def kernel_paths(extra: list[str] | None = None) -> list[Path]:
    raw = list(extra or []) + [p for p in os.environ.get("KBENCH_KERNEL_PATH", "").split(os.pathsep) if p]
    paths = []
    for p in raw:
        path = Path(p).expanduser().resolve()
        if not path.is_dir():
            raise UsageError(f"kernel path {p} is not a folder (from --kernel-path or KBENCH_KERNEL_PATH)")
        paths.append(path)
    return paths


def _import_user_package(folder: Path, name: str) -> str:
    """Import ``folder/name`` as ``kbench_user_kernels.<name>`` so it cannot clash with installed modules."""
    mod_name = f"{USER_NS}.{name}"
    if mod_name in sys.modules:
        return mod_name
    if USER_NS not in sys.modules:
        ns = types.ModuleType(USER_NS)
        ns.__path__ = []
        sys.modules[USER_NS] = ns
    spec = importlib.util.spec_from_file_location(
        mod_name, folder / name / "__init__.py", submodule_search_locations=[str(folder / name)]
    )
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import kernel package {folder / name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return mod_name


def packages(extra_paths: list[str] | None = None) -> dict[str, PackageRef]:
    """Every kernel package visible: shipped ones, then those on the kernel path (names must not clash)."""
    shipped = importlib.import_module(SHIPPED)
    found = {
        m.name: PackageRef(m.name, f"{SHIPPED}.{m.name}", "kbench")
        for m in pkgutil.iter_modules(shipped.__path__)
        if m.ispkg and not m.name.startswith("_")
    }
    for folder in kernel_paths(extra_paths):
        for child in sorted(folder.iterdir()):
            if not (child / "__init__.py").is_file() or child.name.startswith((".", "_")):
                continue
            if child.name in found:
                raise UsageError(
                    f"kernel package '{child.name}' exists both in {found[child.name].origin} and {folder}; rename one"
                )
            found[child.name] = PackageRef(child.name, _import_user_package(folder, child.name), str(folder))
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
        ref = PackageRef(package, like.__module__.rsplit(".", 1)[0], "loaded")
    else:
        ref = find_package(package, extra_paths)
    versions = ref.versions()
    if not versions:
        raise UsageError(f"kernel package '{package}' has no version modules")
    chosen = version or (DEFAULT_VERSION if DEFAULT_VERSION in versions else versions[0])
    if chosen not in versions:
        raise UsageError(f"unknown version '{chosen}' of {package}; versions: {', '.join(versions)}")
    module = importlib.import_module(f"{ref.module}.{chosen}")
    plan = getattr(module, "PLAN", None)
    if not (isinstance(plan, type) and issubclass(plan, KernelPlan)):
        raise UsageError(f"{package} {chosen}: the module must export PLAN = <a KernelPlan subclass>")
    return plan
