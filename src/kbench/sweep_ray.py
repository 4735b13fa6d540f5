"""`kbench sweep --executor ray`: each point of a sweep is a Ray task that asks for one GPU, runs the same point code
a local worker runs (``sweep.point_row``: the pipeline, under the per-GPU profiling lock of its node), and sends its
run folder's small files home; the driver writes them under its own ``--out`` and records the host and GPU each
point ran on. Ray is an optional extra (``pip install "kbench[ray]"``), imported only here.

On the node, a point's run folder lives under ``<node root>/<kernel>-<sweep folder name>/`` (``node_root``, default
the node's temporary folder / ``kbench-ray-<uid>``): the node root is the worker's user's alone (made 0700; one owned
by another user, open to others, a link, or below a folder others may write is refused in one line, the point's
row), so no one else can swap a run folder for one of links. Its files come home as read without following a link
(regular files only, nothing outside the run folder) and are written with no more access than they had on the node.
Large captures (``CAPTURES`` suffixes, or any file over ``SMALL_BYTES``) stay there unless ``fetch_captures``; the
fetched folder's ``captures-on-node.txt`` names them.

Faults: a task whose worker process or node dies is retried ``retries`` times by Ray (``max_retries``); a point that
still fails is a row with its one-line error and the sweep goes on. Ctrl-C (or SIGTERM) cancels the outstanding
tasks (forced: their workers are ended) and keeps every finished point, which ``--resume`` then skips.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Annotated, Any

from pydantic import Field, ValidationError

from kbench import fsutil, sweep
from kbench.capture.tools import ToolMissing
from kbench.errors import KbenchError, NoGpuError, UsageError, first_line
from kbench.fsutil import safe, write_json_atomic, write_text_atomic
from kbench.model import Model
from kbench.report import folder

RETRIES = 2  # Ray's max_retries per point: a point's task runs at most 3 times when its worker or node dies
CAPTURES = (".ncu-rep", ".nsys-rep", ".sqlite", ".qdstrm", ".hatchet")  # profiler captures: fetched only when asked
SMALL_BYTES = 8 << 20  # any other file larger than this stays on the node too, unless captures are fetched
ON_NODE = "captures-on-node.txt"
PLACEMENT = "placement.json"
MISSING = "missing: no Ray task returned it"
PointFactory = Callable[[dict[str, Any], list[str], Callable[[str], None]], sweep.PointFn]


def require_ray() -> ModuleType:
    """Ray, or ToolMissing naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise ToolMissing('--executor ray needs Ray, which is not installed here: pip install "kbench[ray]"') from None
    return ray


def connect(ray: ModuleType, address: str | None) -> bool:
    """Join the cluster at ``address`` ("auto": the one running on this host), or start a local one (None); nothing
    when this process already joined one. True when this call did, so the caller shuts it down again."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, log_to_driver=False, include_dashboard=False, configure_logging=False)
    except ConnectionError as e:
        raise ToolMissing(f"--ray-address {address}: no Ray cluster answered ({first_line(e)})") from None
    return True


def gpus_in(resources: dict[str, float]) -> float:
    """The cluster's GPUs, or NoGpuError: every point asks for one, so without any the sweep would wait forever."""
    count = float(resources.get("GPU", 0.0))
    if count < 1:
        raise NoGpuError(
            "the Ray cluster has no GPU (its resources: "
            + ", ".join(f"{k} {v:g}" for k, v in sorted(resources.items()) if "node:" not in k)
            + "); start its nodes on GPU machines (`ray start` finds them) or sweep without --executor ray"
        )
    return count


def node_dir(node_root: str | None, name: str) -> Path:
    """Where this node keeps this sweep's run folders, ``<node root>/<name>``, on the node itself (as its user): the
    node root (default <temporary folder>/kbench-ray-<uid>) this user's private folder (fsutil.private_folder: made
    0700, else NotPrivate saying why not), the sweep's folder made in it."""
    root = Path(node_root or Path(tempfile.gettempdir()) / f"kbench-ray-{fsutil.me()}")
    try:
        fd = fsutil.private_folder(root)
    except fsutil.NotPrivate as e:
        raise fsutil.NotPrivate(
            f"the Ray node folder {e}, so another user could swap the run folders in it: remove it, or give the "
            "node's workers a TMPDIR of their own"
        ) from None
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(safe(name), 0o700, dir_fd=fd)
    finally:
        os.close(fd)
    return Path(os.path.realpath(root)) / safe(name)  # every folder above checked: none can be swapped by others


def small(path: PurePosixPath, size: int, fetch_captures: bool) -> bool:
    """Whether a run folder's file (its path and size) comes home without --fetch-captures."""
    return fetch_captures or (path.suffix not in CAPTURES and size <= SMALL_BYTES)


def where() -> dict[str, Any]:
    """The host and the GPU(s) this task runs on, as Ray and CUDA_VISIBLE_DEVICES say."""
    import ray

    try:
        ids = [str(g) for g in ray.get_gpu_ids()]
        node = ray.get_runtime_context().get_node_id()
    except Exception:  # a task is always inside Ray; read what can be read
        ids, node = [], None
    return {
        "host": socket.gethostname(),
        "node_id": node,
        "gpus": ids,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def task(
    spec: dict[str, Any],
    version: str,
    params: dict[str, str],
    kernel_path: list[str],
    node_root: str | None,
    name: str,
    fetch_captures: bool,
    make_point: PointFactory,
) -> dict[str, Any]:
    """One point, inside a Ray worker: profiled by the same code as a local worker's, into a run folder under this
    node's folder for the sweep (``node_dir``); returns the row, where it ran, and the run folder's regular files
    with their permission bits (the large ones only named), read without following a link."""
    import logging

    log = logging.getLogger("kbench.sweep")
    try:
        root = node_dir(node_root, name)
    except KbenchError as e:  # the point's row says why, as a failed profile would
        row = sweep.Row(version=version, params=params, status=f"failed: {e}", code=e.exit_code)
    else:
        row = sweep.point_row(version, params, make_point({**spec, "out": str(root)}, kernel_path, log.info))
    out: dict[str, Any] = {"row": row.model_dump(mode="json"), "where": where(), "files": {}, "modes": {}, "left": []}
    rel = Path(row.run).relative_to(root) if row.run and Path(row.run).is_relative_to(root) else None
    if rel is None or not rel.parts or ".." in rel.parts:
        return out  # no run folder, or none kbench made in the node's folder: nothing comes home
    run = root / rel
    out["rel"] = str(rel)
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for file, fd in fsutil.plain_files(root, run):
            st = os.fstat(fd)
            out["modes"][file] = stat.S_IMODE(st.st_mode)
            if small(PurePosixPath(file), st.st_size, fetch_captures):
                with os.fdopen(os.dup(fd), "rb") as f:
                    out["files"][file] = f.read()
            else:
                out["left"].append((file, st.st_size, str(run / file)))
    return out


class Where(Model):
    """The host and GPU(s) a task ran on (``where``)."""

    host: str
    node_id: str | None = None
    gpus: list[str]
    cuda_visible_devices: str | None = None


class Answer(Model):
    """What a task returns (``task``), as the driver reads it: data from another process, on another node, checked
    before anything of it is written."""

    row: sweep.Row
    where: Where
    rel: str | None = None  # the run folder below the node's root
    files: dict[str, bytes]  # path in the run folder -> content
    modes: dict[str, Annotated[int, Field(ge=0, le=0o7777)]]  # path -> its permission bits on the node
    left: list[tuple[str, int, str]]  # the files left on the node: path in the run folder, size, path there


def _relative(name: str, what: str) -> PurePosixPath:
    """``name`` as a path that stays below the folder it is joined to (UsageError naming ``what`` otherwise)."""
    path = PurePosixPath(name)
    if "\0" in name or path.is_absolute() or not path.parts or ".." in path.parts:
        raise UsageError(f"the task's {what} {name!r} leads outside the output folder: nothing of it was written")
    return path


def _fresh(out_root: Path, rel: PurePosixPath) -> Path:
    """A new folder ``out_root/rel`` (a fresh name if taken), inside ``out_root`` as resolved."""
    parent = out_root / rel.parent
    folder.below(out_root, parent)
    parent.mkdir(parents=True, exist_ok=True)
    for i in range(100):
        target = parent / (rel.name if i == 0 else f"{rel.name}-ray{i:02d}")
        try:
            target.mkdir()
        except FileExistsError:
            continue
        folder.below(out_root, target)  # a link swapped in while it was made
        return target
    raise UsageError(f"{parent / rel.name} and 99 fresh names beside it are taken")


def landed(got: dict[str, Any], out_root: Path) -> sweep.Row:
    """A finished task's row, its files written under the driver's ``out_root`` (a fresh name if taken). UsageError
    (nothing written) where the answer is malformed or names a place outside ``out_root``."""
    try:
        answer = Answer.model_validate(got)
    except ValidationError as e:
        raise UsageError(f"the task's answer is not one kbench's task gives ({first_line(e)})") from None
    row, at = answer.row, answer.where
    row.node = at.host
    row.gpu = ",".join(at.gpus) or at.cuda_visible_devices
    if answer.rel is not None:
        files = {_relative(name, "file"): (data, answer.modes.get(name, 0o600)) for name, data in answer.files.items()}
        target = _fresh(out_root, _relative(answer.rel, "run folder"))
        for name, (data, mode) in files.items():
            dst = target / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            # a fresh folder: nothing there to overwrite or follow; never more access than on the node (nor the umask)
            fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode & 0o666)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        write_json_atomic(target / PLACEMENT, {"executor": "ray", **at.model_dump()})
        if answer.left:
            lines = [f"{name}\t{size} bytes\t{at.host}:{path}" for name, size, path in answer.left]
            write_text_atomic(
                target / ON_NODE, "not fetched (rerun with --fetch-captures to bring them):\n" + "\n".join(lines) + "\n"
            )
        row.run = str(target)
    return row


def bar(done: int, total: int, failed: int, running: int) -> str:
    """A text bar over finished points (what the CLI's status line shows)."""
    width = 20
    filled = width * done // total if total else width
    extra = f", {failed} not ok" if failed else ""
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} point(s) finished{extra}, {running} running"


def failure(e: BaseException, retries: int) -> str:
    """A point's one line when its task raised instead of returning a row."""
    import ray.exceptions as rx

    if isinstance(e, rx.WorkerCrashedError | rx.NodeDiedError | rx.OwnerDiedError | rx.LocalRayletDiedError):
        return f"failed: its Ray worker or node died on each of {retries + 1} tries ({first_line(e)})"
    if isinstance(e, rx.RayTaskError):
        cause = e.cause if isinstance(e.cause, BaseException) else e
        return f"failed: the Ray task raised {type(cause).__name__}: {first_line(cause)}"
    return f"failed: {type(e).__name__}: {first_line(e)}"


def run(
    spec: dict[str, Any],
    sweep_dir: Path,
    kernel_path: list[str],
    progress: Callable[[str], None],
    *,
    address: str | None = None,
    retries: int = RETRIES,
    fetch_captures: bool = False,
    node_root: str | None = None,
    make_point: PointFactory = sweep.profiler,
) -> list[sweep.Row]:
    """Every point not yet in ``points.jsonl`` as a Ray task of one GPU (each row appended as it lands); all rows,
    in grid order."""
    ray = require_ray()
    sweep.write_spec(spec, sweep_dir)
    todo, done = sweep.todo(spec, sweep_dir)
    total = len(todo) + len(done)
    if done:
        progress(f"resuming: {len(done)} of {total} point(s) already done")
    if not todo:
        return sweep.collect(spec, sweep_dir, missing=MISSING)
    started = connect(ray, address)
    try:
        gpus = gpus_in(ray.cluster_resources())
        progress(f"Ray: {len(todo)} point(s) as tasks of one GPU each, on a cluster of {gpus:g} GPU(s)")
        name = f"{spec['kernel']}-{sweep_dir.name}"  # the node's folder for it: made and checked on the node
        remote = ray.remote(task).options(num_gpus=1, max_retries=retries, retry_exceptions=False)
        paths = [str(Path(k).resolve()) for k in kernel_path]  # a task's working folder is not this one
        refs = {remote.remote(spec, v, p, paths, node_root, name, fetch_captures, make_point): (v, p) for v, p in todo}
        pending = list(refs)
        finished = len(done)
        bad = sum(r.status != "ok" for r in done)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                version, params = refs[ready[0]]
                try:
                    row = landed(ray.get(ready[0]), Path(spec["out"]))
                except ray.exceptions.RayError as e:
                    row = sweep.Row(version=version, params=params, status=failure(e, retries))
                except UsageError as e:  # an answer naming a place outside --out: a failed point, nothing written
                    row = sweep.Row(version=version, params=params, status=f"failed: {e}")
                sweep.record(row, sweep_dir)
                finished += 1
                bad += row.status != "ok"
                progress(bar(finished, total, bad, min(len(pending), int(gpus))))
        except BaseException:  # Ctrl-C, SIGTERM: end what is still out, keep what landed
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()
    return sweep.collect(spec, sweep_dir, missing=MISSING)
