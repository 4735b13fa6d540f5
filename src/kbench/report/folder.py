"""Run folders: out/profiles/<mode>/<kernel>/<params>/<timestamp>/, never reused; failures marked, not half-written."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kbench.fsutil import json_object, pid_alive, read_nofollow, write_json_atomic, write_text_atomic
from kbench.inputs import TooLarge

DEFAULT_ROOT = Path("out") / "profiles"
RESULT = "result.json"
REPORT_JSON = "report.json"  # report.md's facts with their provenance (kbench.report.report_json)
REPORT_JSON_HOLDS = "this report's facts for programs, each number with its source (measured, analytic, derived)"
PARAMS = "params.json"
FAILED = "FAILED.txt"


def owner() -> dict[str, Any]:
    """Who writes a run folder (params.json ``pid``, ``host``): a folder still "running" whose process is gone died."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def died(params: dict[str, Any]) -> bool:
    """A run recorded as running on this host whose process no longer exists (killed, or the machine restarted)."""
    pid, host = params.get("pid"), params.get("host")
    if params.get("status") != "running" or not isinstance(pid, int) or host != socket.gethostname():
        return False
    return not pid_alive(pid)


def timestamp(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def new_run_dir(root: Path, mode: str, kernel: str, params_slug: str, now: datetime | None = None) -> Path:
    """Create a fresh folder; a second run in the same second gets a -01, -02 ... suffix (still sortable). It is
    always inside ``root`` as resolved: a symbolic link below ``root`` (``out/annotation -> elsewhere``) is refused,
    so a fence on the output folder (``kbench mcp``'s roots) holds for the run folder too."""
    parent = root / mode / kernel / params_slug
    below(root, parent)
    made = fresh_dir(parent, now)
    below(root, made)  # a link swapped in while it was made
    return made


def below(root: Path, path: Path) -> None:
    """UsageError unless ``path`` resolves inside ``root`` (symbolic links followed)."""
    if not path.resolve().is_relative_to(root.resolve()):
        from kbench.errors import UsageError

        raise UsageError(
            f"{path} leads outside the output folder {root} (a symbolic link below it, to {path.resolve()}): kbench "
            "writes run folders inside the output folder only; name the link's target as the output folder instead"
        )


def fresh_dir(parent: Path, now: datetime | None = None) -> Path:
    """A new ``<parent>/<UTC timestamp>[-NN]`` folder, never one that exists (parents made as needed)."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        from kbench.errors import KbenchError

        raise KbenchError(f"cannot create output folder {parent}: {e.strerror}; choose another with --out") from None
    stamp = timestamp(now)
    for i in range(100):
        candidate = parent / (stamp if i == 0 else f"{stamp}-{i:02d}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise RuntimeError(f"more than 100 runs in one second under {parent}")


def mark_failed(run_dir: Path, params: dict[str, Any], error: BaseException) -> None:
    """Record why the run failed: status in params.json and the traceback in FAILED.txt; no report.md."""
    from kbench.errors import Terminated

    interrupted = isinstance(error, KeyboardInterrupt | Terminated)
    status = "interrupted" if interrupted else "failed"
    message = (
        "interrupted (Ctrl-C)"
        if isinstance(error, KeyboardInterrupt)
        else f"interrupted ({error})"
        if interrupted
        else f"{type(error).__name__}: {error}"
    )
    # best effort: on a full disk the mark may not fit either, and the original error is the one to report
    with contextlib.suppress(OSError):
        (run_dir / "report.md").unlink(missing_ok=True)
        write_json_atomic(run_dir / PARAMS, {**params, "status": status, "error": message})
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        write_text_atomic(run_dir / FAILED, f"{status}: {message}\n\n{trace}")


@contextmanager
def marked_on_failure(run_dir: Path, params: dict[str, Any]) -> Iterator[None]:
    """Whatever escapes the block (an error, Ctrl-C) marks the run folder failed, then goes on up."""
    try:
        yield
    except BaseException as e:
        mark_failed(run_dir, params, e)
        raise


def made_with(capture: Path) -> dict[str, Any]:
    """The params.json of the run folder a capture file lies in (kernel, parameters, device), or {} for a capture
    from elsewhere or an unreadable one (a symbolic link included)."""
    return json_object(capture.parent / PARAMS) or {}


PREDICTED = "predicted.json"  # the access run's predictions a GPU run's catalogue read (kbench.modes.access)


def predicted_beside(capture: Path) -> dict[str, Any]:
    """The predictions the live run that made a capture read (predicted.json beside it): {"from": the access run,
    "stages": {stage: Predicted record}}; {} where there are none or they cannot be read."""
    made = json_object(capture.parent / PREDICTED) or {}
    return made if isinstance(made.get("stages"), dict) else {}


def tiling_beside(capture: Path) -> dict[str, dict[str, Any]]:
    """The launch records (tiling/<stage>.json: grid, registers, the compiled kernel's instruction mix) of the run
    folder a capture file lies in, by stage; {} where there are none or they cannot be read."""
    out: dict[str, dict[str, Any]] = {}
    if (capture.parent / "tiling").is_symlink():  # kbench makes it a folder: a link may lead anywhere
        return out
    for p in sorted((capture.parent / "tiling").glob("*.json")):
        if (record := json_object(p)) is not None:
            out[p.stem] = {
                **record,
                **compiled_beside(capture.parent, p.stem, record),
                **serialized_beside(capture.parent, p.stem, record),
            }
    return out


def serialized_beside(run: Path, stage: str, record: dict[str, Any]) -> dict[str, Any]:
    """For a launch record made before ptxas's messages were read: what compiled/<stage>/ptxas.txt and the kernel's
    SASS beside it say of its warpgroup MMAs (kbench.analysis.ptxas); {} where the record has them or neither file is
    there."""
    kernel = record.get("kernel")
    if "wgmma_serialized" in record or not isinstance(kernel, str) or not re.fullmatch(r"\w[\w.$-]*", kernel):
        return {}
    from kbench.analysis import ptxas

    said, listed = _compiled_text(run, stage, "ptxas.txt"), _compiled_text(run, stage, f"{kernel}.sass")
    return ptxas.facts(said, listed, kernel) if said is not None or listed is not None else {}


def compiled_beside(run: Path, stage: str, record: dict[str, Any]) -> dict[str, Any]:
    """For a launch record made before the TTGIR's facts were kept: what the compiled kernel kbench kept beside it
    (compiled/<stage>/<kernel>.ttgir and .ptx) says, read by today's code; {} where the record has them or the
    files are not there."""
    kernel = record.get("kernel")
    if "atomics" in record or not isinstance(kernel, str) or not re.fullmatch(r"\w[\w.$-]*", kernel):
        return {}
    from kbench.analysis.ptx import instruction_mix
    from kbench.analysis.ttgir import compiled_facts

    ttgir, ptx = _compiled_text(run, stage, f"{kernel}.ttgir"), _compiled_text(run, stage, f"{kernel}.ptx")
    found: dict[str, Any] = compiled_facts(ttgir) if ttgir is not None else {}
    if ptx is not None:
        found["instructions"] = instruction_mix(ptx).model_dump(mode="json")
    return found


def _compiled_text(run: Path, stage: str, name: str) -> str | None:
    """A file kbench kept in compiled/<stage>/ as text; None where it is not there or not readable as such."""
    try:
        return read_nofollow(run / "compiled" / stage / name).decode()
    except (OSError, UnicodeDecodeError, TooLarge):
        return None


def stamped(name: str) -> bool:
    """Whether a folder is named as kbench names a run: its UTC timestamp, 20261123T121408Z[-NN]."""
    s = name.split("-")[0]
    return len(s) == 16 and s[8] == "T" and s.endswith("Z") and (s[:8] + s[9:15]).isdigit()


def previous_run(run_dir: Path, allowed: Callable[[Path], object] = Path) -> Path | None:
    """The latest earlier successful run of the same mode, kernel and parameters (any version) beside ``run_dir``:
    in kbench's layout every timestamp-named sibling is one (the parent folder names the parameters); elsewhere
    (committed or renamed folders) each folder's params.json says what it ran. A shipped package's copy (my_<pkg>,
    kbench clone) with none of its own takes the package's it was copied from: its own folder in kbench's layout
    (``allowed`` sees it before it is read), its siblings elsewhere. None when there is none."""
    from kbench.plan.clone import copied_from

    me = made_with(run_dir / PARAMS)
    found = _latest_before(run_dir, run_dir.parent, me, me.get("kernel"))
    origin = copied_from(me["kernel"]) if found is None and isinstance(me.get("kernel"), str) else None
    if origin is None:
        return found
    where = run_dir.parent
    if stamped(run_dir.name):  # <out>/<mode>/<kernel>/<params>/<stamp>: the same mode and params of the origin
        where = run_dir.parent.parent.parent / origin / run_dir.parent.name
        allowed(where)  # before anything there is looked at
        if where.parent.is_symlink() or where.is_symlink() or not where.is_dir():
            return None  # kbench makes these folders: a link may lead anywhere
    return _latest_before(run_dir, where, me, origin)


def _latest_before(run_dir: Path, where: Path, me: dict[str, Any], kernel: Any) -> Path | None:
    """The latest successful run in ``where`` before ``run_dir`` of ``run_dir``'s mode and parameters and of
    ``kernel``: in kbench's layout (``where`` names them) every timestamp-named folder, elsewhere those whose
    params.json says so."""
    layout = stamped(run_dir.name)

    def what(made: dict[str, Any], of: Any) -> tuple[Any, ...]:
        return (made.get("mode"), of, made.get("params"))

    def when(p: Path, made: dict[str, Any]) -> str:
        return p.name if layout else str(made.get("started_at") or "")

    found = []
    for p in where.iterdir():
        if p == run_dir or p.is_symlink() or not p.is_dir() or not (p / RESULT).is_file() or (p / FAILED).exists():
            continue  # a link is no run kbench made (kbench runs lists none): it may lead anywhere
        made = made_with(p / PARAMS)
        same = stamped(p.name) if layout else bool(me) and what(made, made.get("kernel")) == what(me, kernel)
        if same and when(p, made) < when(run_dir, me):
            found.append((when(p, made), p))
    return max(found)[1] if found else None


# What a reader (often an agent) opens after report.md, in that order: the pattern, then what it holds.
GUIDE: tuple[tuple[str, str], ...] = (
    ("source/*.md", "the stage's source lines with instructions executed and warp-stall samples, hottest first"),
    ("lines/*.md", "the stage's compiled kernel line by line, its instructions as written (static), loops first"),
    ("tiling/*.json", "the stage's launch: config, grid, registers, spills, shared memory"),
    ("tiling/*/autotuning.json", "every tuning configuration tried for the stage, with its time"),
    ("timings.json", "every timed repetition, per stage and for the whole plan"),
    ("kernels.csv", "one row per profiled kernel with every metric kbench reads"),
    ("rules.csv", "every ncu rule result, with its estimate"),
    ("report-verbose.md", "every ncu rule message and metric of every kernel: long, search it rather than read it"),
    ("stages.csv", "per-stage timeline figures; windows.csv, gaps.csv and occurrences.csv beside it"),
    ("trace.json", "the timeline for Perfetto (ui.perfetto.dev) or chrome://tracing"),
    ("timeline.png", "the timeline picture (Timeline says which stretch): a lane per stream, kernels by stage, idle"),
    ("roofline.png", "the roofline chart"),
    ("distance.png", "each stage's distance to its practical roof, step by step (report.md's Distance)"),
    ("access.md", "every load and store line of every stage, predicted on CPU (the report shows the first few)"),
    ("access/*.png", "which of the first programs read and wrote each element of a tensor"),
    ("predicted.json", "the access run's predictions this run's catalogue read (its load/store lines, masked lanes)"),
)


def guide(run_dir: Path) -> list[tuple[str, str]]:
    """The run folder's files a reader opens next (relative paths), each with what it holds; report.json first
    (written in the same step as report.md)."""
    return [
        (REPORT_JSON, "this report's facts for programs, each number with its source (measured/analytic/derived)")
    ] + [
        (p.relative_to(run_dir).as_posix(), what)
        for pattern, what in GUIDE
        for p in sorted(run_dir.glob(pattern))
        if p.is_file()
    ]
