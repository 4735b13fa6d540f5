"""`kbench sweep`: versions x a grid of parameters, each point one profile through the pipeline, then one table,
plots and the bound-flip map (where along each swept parameter the classification changes, and which version is
fastest where).

The sweep folder (``<out>/sweeps/<kernel>/<timestamp>/``) holds ``sweep.json`` (what was asked), ``points.jsonl``
(one line per finished point, appended as it finishes: an interrupted sweep resumes from it with ``--resume``),
``sweep.csv`` and ``sweep.md`` (the table and the map) and ``plots/`` (written by kbench.sweep_report). The profiles
themselves are ordinary run folders under ``<out>``.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from kbench import inputs
from kbench.errors import ConfigError, KbenchError, UsageError
from kbench.fsutil import checked_name, open_plain, safe, write_json_atomic
from kbench.model import Model, first_error
from kbench.report import folder

SPEC = "sweep.json"
PointFn = Callable[[str, dict[str, str]], Any]  # profiles one point: a version at some values -> its result
POINTS = "points.jsonl"


class Row(Model):
    """One point of the sweep: a version at one combination of parameters."""

    version: str
    params: dict[str, str]  # the swept and the fixed values, as given
    status: str  # ok, or refused / failed with the one line that said why
    duration_us: float | None = None  # the whole plan on the GPU (its measured median, else the stages' sum)
    interpreter_us: float | None = None  # access mode: Triton's CPU interpreter's time instead (never GPU time)
    tflops: float | None = None
    gbps: float | None = None
    roof_pct: float | None = None  # the stages' roofline bounds over the duration
    bottleneck: str | None = None
    # which roof bounds the plan's own model (the roof holding the larger share of its stages' bound times):
    # analytic, where the intensity sits against the ridge point, whatever the kernel reaches
    roof: str | None = None
    run: str | None = None
    gpu: str | None = None  # the worker's CUDA_VISIBLE_DEVICES (one worker per GPU), or the GPU Ray gave the task
    node: str | None = None  # the host a Ray task ran on (``--executor ray``); None: this host
    code: int | None = None  # a failed point's exit code as a profile of its own would have it (3: no GPU)
    # access mode (no GPU): what the point's trace predicts for ``device`` (kbench.analysis.access_figures.plan_access)
    device: str | None = None  # the device the point's trace was predicted for
    predicted_us: float | None = None  # the stages' predicted times on the device's practical roofs
    sector_use: float | None = None  # bytes used per 32-byte sector over every load and store line (of 32)
    worst_sector_use: float | None = None  # the same at the worst line
    masked_pct: float | None = None  # lanes masked off at the loads and stores
    requested_bytes: float | None = None  # bytes the active lanes load and store
    model_bytes: float | None = None  # the plan's model of the bytes it moves

    def key(self) -> str:
        return key(self.version, self.params)


@dataclass(frozen=True)
class Swept:
    """A finished sweep: its folder, every point's row in grid order, and sweep.md's text."""

    folder: Path
    rows: list[Row]
    markdown: str


def key(version: str, params: dict[str, str]) -> str:
    """A point's identity in points.jsonl: its version and parameter values, in any order."""
    return json.dumps([version, sorted(params.items())])


def grid(
    versions: Sequence[str], swept: dict[str, list[str]], fixed: dict[str, str]
) -> list[tuple[str, dict[str, str]]]:
    """Every version at every combination of the swept values (in the order given), the fixed values beside them."""
    names = list(swept)
    combos = itertools.product(*(swept[n] for n in names))
    points = [{**fixed, **dict(zip(names, c, strict=True))} for c in combos]
    return [(v, p) for p in points for v in versions]


def ask(
    package: str,
    versions: Sequence[str],
    values: dict[str, str],
    mode: str,
    out: str,
    bench_runs: int | None,
    kernel_path: list[str],
    device: str | None = None,
) -> dict[str, Any]:
    """What a new sweep is asked to do (sweep.json): the package's versions (all by default) checked, the values split
    into swept and fixed, the mode's default repetitions where none are given, and (access mode) the device its
    points predict for, checked as the profile command checks it."""
    from kbench.modes import registry
    from kbench.plan.discovery import find_package

    if device is not None:
        predicting(mode, device)

    ref = find_package(package, kernel_path)
    versions = list(versions) or ref.versions()
    unknown = [v for v in versions if v not in ref.versions()]
    if unknown:
        raise UsageError(f"unknown version '{unknown[0]}' of {ref.name}; versions: {', '.join(ref.versions())}")
    swept, fixed = split_values(values)
    runs = bench_runs if bench_runs is not None else registry.get(mode).default_bench_runs
    return {"kernel": ref.name, "versions": versions, "swept": swept, "fixed": fixed, "mode": mode, "out": out,
            "bench_runs": runs, "device": device}  # fmt: skip


def predicting(mode: str, device: str) -> str:
    """``--device`` as a sweep takes it: with access mode, a device conf/devices.json names (UsageError otherwise,
    as the profile command says it)."""
    from kbench.analysis.devices import load_devices, named_device
    from kbench.modes import registry

    if "device" not in getattr(registry.get(mode), "options", ()):
        raise UsageError(
            f"--device names the device --prof_type=access predicts for; a --prof_type={mode} point runs on the "
            "active GPU"
        )
    named_device(load_devices(), device)  # an unknown one: its one line naming the known ones
    return device


def split_values(values: dict[str, str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """``--s=1,4,16`` is swept, ``--h=16`` fixed; an empty item (``--s=1,,4``) is refused."""
    swept, fixed = {}, {}
    for name, raw in values.items():
        items = [v.strip() for v in raw.split(",")]
        if any(not v for v in items):
            raise UsageError(f"--{name}={raw}: an empty value in the list")
        if len(items) > 1:
            swept[name] = list(dict.fromkeys(items))
        else:
            fixed[name] = items[0]
    return swept, fixed


def row_of(version: str, params: dict[str, str], result: Any) -> Row:
    """The point's figures from a ProfileResult."""
    from kbench.report.models import totals

    plan = totals(result)
    bounds = [s.bound_us for s in result.figures.stages]
    on_gpu = result.figures.timer == "gpu"
    total = plan.duration_us if on_gpu else None  # interpreter time is no duration, rate or share of a roof
    predicted: dict[str, Any] = {}
    if not on_gpu and result.sections.accesses is not None:  # what the trace predicts, for the device it names
        from kbench.analysis.access_figures import plan_access

        facts = plan_access(result.figures.stages, result.sections.accesses.sites())
        predicted = {"device": result.device, **{k: v for k, v in facts.items() if k in Row.model_fields}}
    return Row(
        version=version,
        params=params,
        status="ok",
        duration_us=total,
        interpreter_us=None if on_gpu else plan.duration_us,
        tflops=plan.tflops,
        gbps=plan.gbps,
        roof_pct=100.0 * sum(b for b in bounds if b is not None) / total if total and None not in bounds else None,
        bottleneck=result.figures.bottleneck,
        roof=model_roof(result),
        run=result.out_dir,
        **predicted,
    )


def model_roof(result: Any) -> str | None:
    """'memory' or 'compute': the roof under which the plan's model puts most of its lower-bound time."""
    held: dict[str, float] = {}
    for s in result.figures.stages:
        if s.limiting_roof and s.bound_us is not None:
            held[s.limiting_roof] = held.get(s.limiting_roof, 0.0) + s.bound_us
    return max(held, key=lambda r: held[r]) if held else None


def done_rows(sweep_dir: Path) -> list[Row]:
    path = sweep_dir / POINTS
    try:  # a file another run or user may have left: never through a link, its size checked before it is read
        with os.fdopen(open_plain(path, os.O_RDONLY), "rb") as f:
            text = inputs.read_limited(f, path).decode(errors="replace")
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            rows.append(Row.model_validate_json(line))
        except ValueError:
            continue  # a line cut by an interruption: that point runs again
    return rows


def run(
    spec: dict[str, Any],
    sweep_dir: Path,
    profile_point: PointFn,
    progress: Callable[[str], None],
    share: tuple[int, int] = (0, 1),
    gpu: str | None = None,
) -> list[Row]:
    """Profile every point not yet in ``points.jsonl`` (appending each as it finishes); all rows, in grid order.
    A point whose parameters its version refuses, or whose profile fails, is a row with that line, not the end.
    ``share`` (i, n): a worker of n takes every n-th point from the i-th; the rows returned are then only its own."""
    if share == (0, 1):
        write_spec(spec, sweep_dir)
    points = grid(spec["versions"], spec["swept"], spec["fixed"])
    mine = points[share[0] :: share[1]]
    have = {r.key(): r for r in done_rows(sweep_dir)}
    todo = [(v, p) for v, p in mine if key(v, p) not in have]
    if have:
        progress(f"resuming: {len(mine) - len(todo)} of {len(mine)} point(s) already done")
    for i, (version, params) in enumerate(todo, 1):
        shown = " ".join(f"{k}={v}" for k, v in params.items())
        progress(f"sweep point {len(mine) - len(todo) + i}/{len(mine)}: {version} {shown}")
        row = point_row(version, params, profile_point)
        row.gpu = gpu
        record(row, sweep_dir)
        have[row.key()] = row
    return [have[key(v, p)] for v, p in mine]


def outcome(rows: list[Row]) -> tuple[str, int]:
    """How the sweep ended, for its last line, and the exit status: 0 when every point ran or its version refused it
    (the plan's own limits), 6 when some ran and some failed; when none ran, the exit code its points failed with
    where they all failed alike (3: no GPU, as one profile would), else 1."""
    ok = sum(r.status == "ok" for r in rows)
    refused = sum(r.status.startswith("refused") for r in rows)
    failed = len(rows) - ok - refused
    counts = f"{ok} of {len(rows)} point(s) ran, {failed} failed, {refused} refused by their version"
    if ok == 0:
        codes = {r.code for r in rows if r.status.startswith("failed")}
        alike = next(iter(codes)) if len(codes) == 1 else None
        return f"{counts}: no point ran (sweep.md says why, per point)", alike if alike is not None else 1
    return counts, 6 if failed else 0


def point_row(version: str, params: dict[str, str], profile_point: PointFn) -> Row:
    """One point profiled (the same code in a local worker and in a Ray task): its row, or a row saying why the
    version refused the parameters or the profile failed."""
    try:
        return row_of(version, params, profile_point(version, params))
    except UsageError as e:
        return Row(version=version, params=params, status=f"refused: {e}")
    except KbenchError as e:
        return Row(version=version, params=params, status=f"failed: {e}", code=e.exit_code)


def record(row: Row, sweep_dir: Path) -> None:
    """Append a finished point to points.jsonl (one short line per append: workers share the file)."""
    with os.fdopen(open_plain(sweep_dir / POINTS, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "w") as f:
        f.write(row.model_dump_json() + "\n")  # never through a link planted there (a resumed folder: anyone's)


def todo(spec: dict[str, Any], sweep_dir: Path) -> tuple[list[tuple[str, dict[str, str]]], list[Row]]:
    """The points no earlier run of this sweep finished, in grid order, and the rows of those it did."""
    done = done_rows(sweep_dir)
    have = {r.key() for r in done}
    return [(v, p) for v, p in grid(spec["versions"], spec["swept"], spec["fixed"]) if key(v, p) not in have], done


def write_spec(spec: dict[str, Any], sweep_dir: Path) -> None:
    """sweep.json: what was asked (a resumed sweep, and each worker, reads it back)."""
    write_json_atomic(sweep_dir / SPEC, spec)


def collect(spec: dict[str, Any], sweep_dir: Path, missing: str) -> list[Row]:
    """Every point's row in grid order from ``points.jsonl``, after workers ran; a point none finished says
    ``missing``."""
    have = {r.key(): r for r in done_rows(sweep_dir)}
    rows = []
    for v, p in grid(spec["versions"], spec["swept"], spec["fixed"]):
        rows.append(have.get(key(v, p)) or Row(version=v, params=p, status=missing))
    return rows


def new_dir(sweep_root: Path, kernel: str) -> Path:
    """A fresh ``<sweep_root>/<kernel>/<timestamp>/`` (never reused)."""
    return folder.fresh_dir(sweep_root / safe(kernel))


PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a plan parameter's name (an identifier), matched whole


class Asked(Model):
    """sweep.json as ``ask`` writes it, checked when --resume reads it back (a folder another user or a repo may have
    left): its names pass the checks typed ones do, so that none names a file or folder elsewhere (a swept name names
    a plot), and its mode is one kbench has."""

    kernel: str
    versions: list[str] = Field(min_length=1)
    swept: dict[str, list[str]]
    fixed: dict[str, str]
    mode: str
    out: str
    bench_runs: int = Field(ge=1)
    device: str | None = None  # access mode: the device its points predict for

    @field_validator("kernel")
    @classmethod
    def _kernel(cls, value: str) -> str:
        return checked_name(value, "sweep.json names the kernel")

    @field_validator("versions")
    @classmethod
    def _versions(cls, value: list[str]) -> list[str]:
        return [checked_name(v, "sweep.json names the version") for v in value]

    @field_validator("swept", "fixed")
    @classmethod
    def _parameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        if bad := [name for name in value if not PARAMETER.fullmatch(name)]:
            raise UsageError(
                f"sweep.json names the parameter {bad[0]!r}, which is no parameter name: the file was altered"
            )
        return value

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        from kbench.modes import registry

        registry.get(value)  # an unknown mode: its one line naming the known ones
        return value

    @model_validator(mode="after")
    def _device(self) -> Asked:
        if self.device is not None:
            predicting(self.mode, self.device)
        return self


def resumed(sweep_dir: Path, out: str | None = None) -> dict[str, Any]:
    """The spec of an earlier sweep folder, to finish it (UsageError where it is not one kbench wrote). Its points go
    under ``out`` where the caller names one (--out), else under the root sweep.json records only where that stays
    below this folder (relative, no '..', no link leading out): the folder may be anyone's, and its sweep.json
    must not pick where kbench writes (UsageError naming --out otherwise)."""
    try:
        raw = inputs.read_json(sweep_dir / SPEC)
    except (OSError, ConfigError):
        raise UsageError(f"--resume {sweep_dir}: no readable {SPEC}; name a sweep folder kbench made") from None
    try:
        spec = Asked.model_validate(raw).model_dump()
    except ValidationError as e:
        raise UsageError(f"--resume {sweep_dir}: {SPEC} is not a sweep kbench wrote ({first_error(e)})") from None
    if out is not None:
        return {**spec, "out": out}
    named, here = PurePath(spec["out"]), Path.cwd().resolve()
    if named.is_absolute() or ".." in named.parts or not (here / named).resolve().is_relative_to(here):
        raise UsageError(
            f"--resume {sweep_dir}: its {SPEC} puts the points under {spec['out']!r}, which is not below this folder "
            f"({here}) or leads out of it through a link; give --out <folder> to say where they go"
        )
    return spec


def profiler(spec: dict[str, Any], kernel_path: list[str], progress: Callable[[str], None]) -> PointFn:
    """Profile one point as the sweep asked (its mode, repetitions and output root) through the pipeline."""

    def point(version: str, values: dict[str, str]) -> Any:
        from kbench import pipeline
        from kbench.modes.base import RunOptions
        from kbench.plan.discovery import load_version

        plan = load_version(spec["kernel"], version, kernel_path).from_values(dict(values))
        opts = RunOptions(
            out_root=Path(spec["out"]), bench_runs=spec["bench_runs"], progress=progress, device=spec.get("device")
        )
        return pipeline.profile(spec["mode"], plan, opts)

    return point


def run_workers(spec: dict[str, Any], sweep_dir: Path, devices: list[str], kernel_path: list[str]) -> list[Row]:
    """One `kbench sweep --resume <dir> --worker i/n` process per GPU (CUDA_VISIBLE_DEVICES), all at once; their rows
    merged in grid order (a point no worker finished says so)."""
    from kbench.capture import tools

    write_spec(spec, sweep_dir)
    paths = [*(f"--kernel-path={k}" for k in kernel_path), f"--out={spec['out']}"]  # the root checked here
    jobs = [
        (
            tools.python_module("kbench", "sweep", "--resume", str(sweep_dir), f"--worker={i}/{len(devices)}", *paths),
            {**os.environ, "CUDA_VISIBLE_DEVICES": gpu},
            sweep_dir / f"worker-{i}.log",
        )
        for i, gpu in enumerate(devices)
    ]
    tools.run_all(jobs, timeout_s=7 * 24 * 3600.0)
    return collect(spec, sweep_dir, missing="missing: its worker stopped early (see worker-*.log)")
