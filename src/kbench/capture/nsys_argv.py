"""The exact Nsight Systems command lines kbench runs (pure, tested as lists)."""

from __future__ import annotations

from pathlib import Path

# CUDA API and kernels plus NVTX; no CPU sampling or context switches (a small program made a 2 GB capture
# with them on); CUDA graphs traced node by node so a graph's kernels show up one by one.
PROFILE_OPTIONS = ["-t", "cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node"]


def profile_argv(nsys: Path, out_base: Path, child: list[str]) -> list[str]:
    """``nsys profile`` of ``child``, writing ``<out_base>.nsys-rep``."""
    return [str(nsys), "profile", *PROFILE_OPTIONS, "--force-overwrite=true", "-o", str(out_base), *child]


def export_argv(nsys: Path, report: Path, sqlite: Path) -> list[str]:
    """``nsys export`` of a report to SQLite."""
    return [str(nsys), "export", "-t", "sqlite", "--force-overwrite=true", "-o", str(sqlite), str(report)]
