"""Output of --list, --predict and --prof_type=disabled."""

from __future__ import annotations

import typer

from kbench.analysis import roofline as rl
from kbench.analysis.devices import load_devices, named_device
from kbench.capture.gpu import active_device, target_device
from kbench.errors import NoGpuError, UsageError
from kbench.plan.base import KernelPlan
from kbench.plan.discovery import catalogue, find_package, load_version


def print_listing(kernel_path: list[str], package: str | None = None) -> None:
    """Every package (or only ``package``) with its versions, parameters and defaults."""
    packages = catalogue(kernel_path)
    if package is not None:
        find_package(package, kernel_path)  # an unknown name is one line naming the known ones
        packages = [p for p in packages if p.name == package]
    for pkg in packages:
        origin = "" if pkg.origin == "kbench" else f"  [from {pkg.origin}]"
        if pkg.broken:
            typer.echo(f"{pkg.name}: BROKEN: {pkg.broken}{origin}")
            continue
        typer.echo(f"{pkg.name}: {pkg.doc}{origin}")
        for v in pkg.versions:
            tag = "  (baseline)" if v.version == pkg.baseline else ""
            typer.echo(f"  {v.version}{tag}: {'BROKEN: ' + v.broken if v.broken else v.doc}")
        typer.echo("  parameters:")
        for p in pkg.params:
            typer.echo(f"    {p.describe()}")


def plan_help(package: str, version: str | None, kernel_path: list[str]) -> str:
    """What `python -m kbench.kernel <package> [<version>] --help` adds: the version's docstring, the package's
    versions, and the version's parameters (type, choices or range, default, help)."""
    ref = find_package(package, kernel_path)
    chosen = version or ref.baseline()
    cls = load_version(package, chosen, kernel_path)
    doc = " ".join((cls.__doc__ or "").split()) or "(no docstring)"
    lines = [f"{package} {chosen}: {doc}", f"versions: {', '.join(ref.versions())} (baseline {ref.baseline()})"]
    lines.append(f"parameters of {package} {chosen} (--name=value):")
    lines += [f"  {p.phrase()}" for p in cls.params()]
    return "\n".join(lines)


def print_prediction(plan: KernelPlan, device_key: str | None) -> None:
    """Roofline-only lower bound per stage from the analytic model; nothing is run."""
    table = load_devices()
    fallback = ""
    if device_key:
        dev = named_device(table, device_key)
    else:
        try:
            dev = active_device(table)
        except NoGpuError:  # as --device's help says: this machine's GPU, else H100_SXM
            dev = target_device(table, None)
            fallback = "; no GPU here: the default --device, name another with --device"
    if dev.spec is None:
        raise UsageError(
            f"{dev.name} is not in conf/devices.json: no roofline to predict from; "
            f"name a known device with --device ({', '.join(table.devices)})"
        )
    ceilings = dev.ceilings()
    typer.echo(
        f"Roofline-only lower bounds for {plan.package} {plan.version} {plan.values()} on "
        f"{dev.spec.display_name} ({dev.key}, datasheet peaks{fallback}):"
    )
    typer.echo(
        f"{'stage':<16}{'precision':>10}{'GFLOP':>12}{'MB':>12}{'FLOP/B':>10}{'ridge':>8}{'bound (us)':>12}  limit"
    )
    total = 0.0
    missing = []
    for s in plan.checked_stages():
        c = ceilings.get(s.precision)
        i = rl.intensity(s.flops, s.dram_bytes)
        ii = "n/a" if i is None else f"{i:.2f}"
        if c is None:
            typer.echo(
                f"{s.name:<16}{s.precision:>10}{s.flops / 1e9:>12.3f}{s.dram_bytes / 1e6:>12.3f}{ii:>10}"
                f"{'n/a':>8}{'n/a':>12}  no {s.precision} peak for this device"
            )
            missing.append(s.name)
            continue
        bound = rl.bound_us(c, s.flops, s.dram_bytes)
        total += bound
        typer.echo(
            f"{s.name:<16}{s.precision:>10}{s.flops / 1e9:>12.3f}{s.dram_bytes / 1e6:>12.3f}{ii:>10}"
            f"{c.ridge:>8.1f}{bound:>12.2f}  {rl.limiting_roof(c, s.flops, s.dram_bytes)}"
        )
    shown = "n/a" if missing else f"{total:.2f}"
    typer.echo(
        f"{'total':<16}{'':>10}{'':>12}{'':>12}{'':>10}{'':>8}{shown:>12}"
        + (f"  (no bound for {', '.join(missing)})" if missing else "")
    )
