"""Reading a Proton profile (Triton's profiler, CUPTI backend): the hatchet JSON tree Proton writes, read through
Triton's own viewer into a hatchet GraphFrame (``triton.profiler.viewer``; needs the ``llnl-hatchet`` package).
Pure: no GPU, tested on profiles captured on an H100.

kbench's proton mode opens one scope per stage (``proton.scope(stage, {"flops<bits>": ..., "bytes": ...})``)
around each repetition; the kernels launched inside are the scope's children, each with its launch ``count`` and
summed ``time (ns)``. Proton keeps sums, not samples: a stage's duration is its kernels' time over the launches
of its first kernel (the repetitions), one mean per stage.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench import inputs
from kbench.errors import ConfigError, KbenchError

HATCHET = ".hatchet"
STALLED = "stalled_"  # Proton's PC-sampling columns: stalled_<reason> samples per source line
WHOLE_KERNEL = "(whole kernel: no line information)"


@dataclass(frozen=True)
class LineSamples:
    """PC samples of one source line of a kernel (Proton's ``mode="pcsampling"``)."""

    where: str  # path:line, as Proton names it
    kernel: str
    samples: int
    stalled: int
    reasons: dict[str, int]  # stall reason (ncu's spelling, lower case) -> stalled samples

    @property
    def top_reason(self) -> str | None:
        return max(self.reasons, key=self.reasons.__getitem__) if any(self.reasons.values()) else None


@dataclass(frozen=True)
class ScopeTime:
    """One scope (a kbench stage) of a Proton profile."""

    name: str
    kernels: dict[str, tuple[int, float]]  # kernel name -> (launches, summed GPU time in ns)
    metrics: dict[str, float] = field(default_factory=dict)  # the scope's own metrics (flops*, bytes), summed
    lines: list[LineSamples] = field(default_factory=list)  # PC samples per source line (a pcsampling profile)

    def hottest(self, n: int) -> list[LineSamples]:
        """The ``n`` most sampled lines, most first."""
        return sorted(self.lines, key=lambda x: -x.samples)[:n]

    def stalls(self) -> dict[str, int]:
        """Stalled samples per reason over every sampled line of the scope, most first."""
        total: dict[str, int] = {}
        for line in self.lines:
            for reason, n in line.reasons.items():
                total[reason] = total.get(reason, 0) + n
        return dict(sorted(((r, n) for r, n in total.items() if n), key=lambda kv: -kv[1]))

    @property
    def repetitions(self) -> int:
        """How many times the scope ran: the launches of its most launched kernel."""
        return max((n for n, _ in self.kernels.values()), default=0)

    @property
    def mean_us(self) -> float | None:
        """GPU time per repetition: every kernel's summed time over the repetitions."""
        reps = self.repetitions
        return sum(ns for _, ns in self.kernels.values()) / reps / 1e3 if reps else None


@dataclass(frozen=True)
class ProtonProfile:
    scopes: list[ScopeTime]
    device: dict[str, Any]  # Proton's device record: arch, num_sms, clock_rate (kHz), memory clock, bus width
    tree: str  # the call-path tree as hatchet renders it (text, no colour)

    def scope(self, name: str) -> ScopeTime | None:
        return next((s for s in self.scopes if s.name == name), None)


def _viewer() -> Any:
    try:
        from triton.profiler import viewer
    except ImportError as e:  # hatchet (llnl-hatchet) or pandas missing: the viewer imports them
        raise KbenchError(
            f"reading a Proton profile needs Triton's profiler viewer and the llnl-hatchet package ({e}); "
            "pip install llnl-hatchet"
        ) from None
    return viewer


def load(path: Path) -> ProtonProfile:
    """The scopes, device record and call-path tree of a Proton .hatchet file; ConfigError when it is not one."""
    try:
        database = inputs.read_json(path, "a readable Proton profile")
    except OSError as e:
        raise ConfigError(f"{path}: not a readable Proton profile ({e})") from None
    if not isinstance(database, list) or not database or not isinstance(database[0], dict):
        raise ConfigError(f"{path}: not a Proton profile (a hatchet JSON list with a ROOT node)")
    viewer = _viewer()
    try:
        try:
            gf, _inclusive, _exclusive, device = viewer.get_raw_metrics(database)
        except AttributeError:  # Triton 3.6's viewer reads the file itself (3.9's takes the parsed list)
            gf, _inclusive, _exclusive, device = viewer.get_raw_metrics(io.StringIO(json.dumps(database)))
        tree = (
            _plain(gf.tree(metric_column="time (ns)", render_header=False))
            if "time (ns)" in gf.dataframe.columns
            else ""
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{path}: Proton's viewer could not read it ({type(e).__name__}: {e})") from None
    scopes = []
    for node in gf.graph.roots[0].children if gf.graph.roots else []:
        kernels, lines = {}, []
        for child in node.children:
            row = gf.dataframe.loc[child]
            count, ns = row.get("count"), row.get("time (ns)")
            if count == count and ns == ns and count:  # NaN-safe: a scope nested in a scope has no kernel time
                kernels[str(child.frame["name"])] = (int(count), float(ns))
            found = [_line(gf.dataframe.loc[leaf], str(leaf.frame["name"])) for leaf in child.children]
            # samples Proton could not map to lines (a module loaded before the session) stay on the kernel
            lines += found if child.children else [_line(row, f"{WHOLE_KERNEL}@{child.frame['name']}")]
        row = gf.dataframe.loc[node]
        metrics = {
            k: float(row[k])
            for k in gf.dataframe.columns
            if (k == "bytes" or k.startswith("flops")) and row[k] == row[k]
        }
        scopes.append(ScopeTime(str(node.frame["name"]), kernels, metrics, [x for x in lines if x is not None]))
    return ProtonProfile(scopes, _first_device(device), tree)


def _line(row: Any, name: str) -> LineSamples | None:
    """A sampled source line (``path:line@kernel``) of a pcsampling profile; None for any other node."""
    samples = row.get("num_samples")
    if samples != samples or samples is None or "@" not in name:  # NaN: not a sampled line
        return None
    where, _, kernel = name.rpartition("@")
    reasons = {k[len(STALLED) :].lower(): int(v) for k, v in row.items() if str(k).startswith(STALLED) and v == v and v}
    return LineSamples(where, kernel, int(samples), int(row.get("num_stalled_samples") or 0), reasons)


def _plain(text: str) -> str:
    """hatchet's tree without its terminal colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _first_device(device: Any) -> dict[str, Any]:
    """Proton's ``{"CUDA": {"0": {...}}}`` record of the first device, or {}."""
    if isinstance(device, dict):
        for per_type in device.values():
            if isinstance(per_type, dict):
                for record in per_type.values():
                    if isinstance(record, dict):
                        return record
    return {}


def overhead_pct(plain_us: float, profiled_us: float) -> float:
    """How much longer the same repetitions took inside the Proton session than outside it, in percent."""
    return 100.0 * (profiled_us / plain_us - 1.0)
