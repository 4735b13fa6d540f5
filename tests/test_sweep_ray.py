"""`kbench sweep --executor ray` on a local Ray cluster on CPU with two logical GPUs: the points run the same point code
the local sweep runs (the replay backend of tests/test_pipeline.py in the workers), their small files come home with
where they ran, and the table, plots and bound-flip map are the local sweep's; a worker that dies is retried, a point
that keeps failing is a row and the sweep goes on, Ctrl-C cancels what is still out and keeps what landed; without
Ray, or without a GPU in the cluster, one line says what to do."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from kbench import sweep, sweep_report
from kbench.errors import NoGpuError, UsageError
from tests import ray_fakes
from tests.conftest import Ran
from tests.test_sweep import replay  # noqa: F401 - the fixture: the replay backend registered here

REPO = Path(__file__).resolve().parents[1]
POINTS = {"s": "1,16", "t": "1024", "b": "32", "d": "48"}  # d=48: the Triton version refuses, the PyTorch one runs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local Ray cluster of 2 CPUs and 2 logical GPUs whose workers can import the tests."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    state = tmp_path_factory.mktemp("ray-state")
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    (state / "tmp").mkdir()  # the workers' temporary folder: the default node folder lands there, not in /tmp
    env = {"PYTHONPATH": path, "KBENCH_STATE_DIR": str(state), "KBENCH_CACHE_DIR": str(state / "cache"),
           "KBENCH_LOCK_CLOCKS": "0", "TMPDIR": str(state / "tmp")}  # fmt: skip
    ray.init(num_cpus=2, num_gpus=2, runtime_env={"env_vars": env}, include_dashboard=False, log_to_driver=False,
             configure_logging=False)  # fmt: skip
    try:
        yield ray
    finally:
        ray.shutdown()


def ask(out: Path, values: dict[str, str], versions: list[str]) -> dict[str, Any]:
    return sweep.ask("mla_decode", versions, values, "replay", str(out), None, [])


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.usefixtures("replay")
def test_ray_points_come_home_with_where_they_ran_and_the_same_table_as_a_local_sweep(
    cluster: Any, isolated: Path
) -> None:
    from kbench import sweep_ray

    local_spec = ask(isolated / "local", POINTS, ["base", "v2"])
    local_dir = sweep.new_dir(isolated / "sweeps", "local")
    local_rows = sweep.run(local_spec, local_dir, sweep.profiler(local_spec, [], lambda m: None), lambda m: None)
    spec = ask(isolated / "home", POINTS, ["base", "v2"])
    folder = sweep.new_dir(isolated / "sweeps", "ray")
    said: list[str] = []
    rows = sweep_ray.run(spec, folder, [], said.append, node_root=str(isolated / "node"), make_point=ray_fakes.replay)
    assert [(r.version, r.params, r.status[:40]) for r in rows] == [
        (r.version, r.params, r.status[:40]) for r in local_rows
    ]
    assert [r.duration_us for r in rows] == [r.duration_us for r in local_rows]
    assert {r.status for r in rows if r.version == "base"} == {"ok"}
    assert all(r.status.startswith("refused: mla_decode v2") for r in rows if r.version == "v2")
    for r in rows:
        assert r.node == socket.gethostname() and r.gpu in {"0", "1"}
    for r in (r for r in rows if r.status == "ok"):
        assert r.run is not None
        run = Path(r.run)
        assert run.is_relative_to(isolated / "home") and (run / "report.md").is_file()
        assert {"report.json", "params.json", "samples.replay"} <= {p.name for p in run.iterdir()}
        placed = json.loads((run / sweep_ray.PLACEMENT).read_text())
        assert placed["executor"] == "ray" and placed["host"] == socket.gethostname() and placed["gpus"] == [r.gpu]
    assert said[-1].startswith("[####################] 4/4 point(s) finished, 2 not ok")
    local_md = sweep_report.write(local_rows, local_spec, local_dir)
    ray_md = sweep_report.write(rows, spec, folder)
    assert ray_md.startswith(local_md)  # the same table, map and plots, then where the points ran
    assert ray_md[len(local_md) :].startswith(f"\n## Where the points ran (Ray)\n\n- {socket.gethostname()}, GPU ")
    assert sorted(p.name for p in (folder / "plots").iterdir()) == sorted(
        p.name for p in (local_dir / "plots").iterdir()
    )
    assert len(sweep.done_rows(folder)) == 4


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.usefixtures("replay")
def test_a_dying_worker_is_retried_a_failing_point_is_a_row_and_the_sweep_goes_on(cluster: Any, isolated: Path) -> None:
    from kbench import sweep_ray

    marks = isolated / "marks"
    marks.mkdir()
    spec = ask(isolated / "home", {"s": "1,2,3,4", "t": "1024", "b": "32", "d": "48"}, ["base"])
    folder = sweep.new_dir(isolated / "sweeps", "ray")
    rows = sweep_ray.run(spec, folder, [], lambda m: None, retries=1, node_root=str(isolated / "node"),
                         make_point=ray_fakes.misbehaving(str(marks)))  # fmt: skip
    status = {r.params["s"]: r.status for r in rows}
    assert status["1"] == "ok"
    assert status["2"] == "ok" and len(list(marks.glob("try-2-*"))) == 2  # died once, retried once
    assert status["3"].startswith("failed: its Ray worker or node died on each of 2 tries (")
    assert len(list(marks.glob("try-3-*"))) == 2
    assert status["4"] == "failed: the Ray task raised RuntimeError: a planted bug in the point code"
    assert len(status["3"].splitlines()) == 1 and len(sweep.done_rows(folder)) == 4


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.usefixtures("replay")
def test_ctrl_c_cancels_what_is_out_and_keeps_what_landed(cluster: Any, isolated: Path) -> None:
    from kbench import sweep_ray

    marks = isolated / "marks"
    marks.mkdir()
    spec = ask(isolated / "home", {"s": "1,5", "t": "1024", "b": "32", "d": "48"}, ["base"])  # s=5: a minute

    def interrupt(message: str) -> None:
        if message.startswith("["):  # the bar: the first point landed
            raise KeyboardInterrupt

    folder = sweep.new_dir(isolated / "sweeps", "ray")
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sweep_ray.run(spec, folder, [], interrupt, node_root=str(isolated / "node"),
                      make_point=ray_fakes.misbehaving(str(marks)))  # fmt: skip
    assert time.monotonic() - started < 50  # not the slow point's minute
    assert [r.params["s"] for r in sweep.done_rows(folder)] == ["1"]
    todo, done = sweep.todo(sweep.resumed(folder, spec["out"]), folder)
    assert [p["s"] for _, p in todo] == ["5"] and len(done) == 1
    time.sleep(2)
    assert not (marks / "finished-5").exists()


def test_without_ray_the_executor_names_the_extra(
    cli: Callable[..., Ran], isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    done = cli("sweep", "mla_decode", "base", "--s=1,2", "--executor", "ray", "--out", "p", "--sweep-out", "s")
    assert done.returncode == 7 and len(done.stderr.strip().splitlines()) == 1
    assert 'pip install "kbench[ray]"' in done.stderr


def test_a_cluster_without_gpus_is_one_line_not_a_wait() -> None:
    from kbench import sweep_ray

    with pytest.raises(NoGpuError, match=r"the Ray cluster has no GPU \(its resources: CPU 2, memory 1e\+09\)"):
        sweep_ray.gpus_in({"CPU": 2.0, "memory": 1e9, "node:10.0.0.1": 1.0})
    assert sweep_ray.gpus_in({"CPU": 2.0, "GPU": 2.0}) == 2.0


def test_large_captures_stay_on_the_node_and_say_where(tmp_path: Path) -> None:
    from kbench import sweep_ray

    big, small = sweep_ray.SMALL_BYTES + 1, sweep_ray.small
    assert not small(PurePosixPath("profile.ncu-rep"), 1, False) and small(PurePosixPath("report.md"), 1, False)
    assert not small(PurePosixPath("big.json"), big, False) and small(PurePosixPath("big.json"), big, True)
    row = sweep.Row(version="v1", params={"s": "1"}, status="ok", run="/node/x/v1/s1/20261125T000000Z")
    got = {"row": row.model_dump(mode="json"), "rel": "annotation/k/s1/20261125T000000Z",
           "where": {"host": "n1", "node_id": "abc", "gpus": ["3"], "cuda_visible_devices": "3"},
           "files": {"report.md": b"r", "tiling/mm.json": b"{}"}, "modes": {"report.md": 0o644},
           "left": [("profile.ncu-rep", 1, "/node/x/profile.ncu-rep")]}  # fmt: skip
    first = sweep_ray.landed(got, tmp_path / "home")
    again = sweep_ray.landed(got, tmp_path / "home")  # the same folder name again: a fresh one, nothing overwritten
    assert first.node == "n1" and first.gpu == "3" and first.run != again.run
    run = Path(first.run or "")
    assert (run / "tiling" / "mm.json").read_text() == "{}" and (run / "report.md").read_text() == "r"
    assert "profile.ncu-rep\t1 bytes\tn1:/node/x/profile.ncu-rep" in (run / sweep_ray.ON_NODE).read_text()
    assert Path(again.run or "").name == "20261125T000000Z-ray01"


@pytest.mark.parametrize(
    ("rel", "name"),
    [
        ("../escaped", "report.md"),  # the run folder climbs out of --out
        ("/abs/escaped", "report.md"),  # or is absolute
        ("event/k/s1/20261125T000000Z", "../../../../../escaped.md"),  # a file name climbs out of its run folder
        ("event/k/s1/20261125T000000Z", "/abs/escaped.md"),  # or is absolute
        ("event/k/s1/20261125T000000Z", "a\x00b"),  # or is no file name at all
        ("event/../../escaped", "report.md"),
        (3, "report.md"),  # a task result of another shape
    ],
)
def test_a_task_result_never_writes_outside_the_output_folder(tmp_path: Path, rel: Any, name: str) -> None:
    """What a task returns is data from another process (another node): the run folder and file names in it are
    checked like any path kbench reads from a file, and a result naming a place outside --out is a failed point."""
    from kbench import sweep_ray

    (tmp_path / "abs").mkdir()
    home, sweep_dir = tmp_path / "a" / "b" / "c" / "home", tmp_path / "sweep"
    sweep_dir.mkdir()
    row = sweep.Row(version="v1", params={"s": "1"}, status="ok", run="/node/x")
    got = {"row": row.model_dump(mode="json"), "rel": rel, "files": {name: b"planted"}, "modes": {}, "left": [],
           "where": {"host": "n1", "node_id": "abc", "gpus": ["3"], "cuda_visible_devices": "3"}}  # fmt: skip
    with pytest.raises(UsageError) as e:  # the sweep's loop makes it the point's failed row
        sweep_ray.landed(got, home)
    assert "outside the output folder" in str(e.value) or "not one kbench's task gives" in str(e.value), e.value
    assert len(str(e.value).splitlines()) == 1
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written == [], written


def test_a_link_below_the_output_folder_is_not_followed_by_a_landing_point(tmp_path: Path) -> None:
    from kbench import sweep_ray

    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (home / "event").symlink_to(outside, target_is_directory=True)
    row = sweep.Row(version="v1", params={"s": "1"}, status="ok", run="/node/x")
    got = {"row": row.model_dump(mode="json"), "rel": "event/k/s1/20261125T000000Z", "files": {"report.md": b"r"},
           "modes": {}, "left": [], "where": HERE}  # fmt: skip
    with pytest.raises(UsageError, match="leads outside the output folder"):
        sweep_ray.landed(got, home)
    assert list(outside.iterdir()) == []


# -- the node's folder: another local user must not be able to swap a run folder for links (issue 50) ----------------
STRANGER = 54321  # a uid no account on a test machine has
HERE = {"host": "n1", "node_id": None, "gpus": ["0"], "cuda_visible_devices": "0"}


class _Point:
    """A point factory whose point makes a run folder under the out root it is given, as the pipeline does, fills it
    with ``plant`` (run folder -> None) and returns a result with what a row reads; ``calls`` counts points run."""

    def __init__(self, plant: Callable[[Path], None] = lambda run: None) -> None:
        self.plant, self.calls = plant, 0

    def __call__(self, spec: dict[str, Any], kernel_path: list[str], progress: Callable[[str], None]) -> sweep.PointFn:
        def point(version: str, params: dict[str, str]) -> Any:
            from types import SimpleNamespace

            self.calls += 1
            run = Path(spec["out"]) / "event" / "k" / "s1" / "20261125T000000Z"
            run.mkdir(parents=True)
            (run / "report.md").write_text("r")
            self.plant(run)
            figures = SimpleNamespace(stages=[], total_us=1.0, bottleneck="Memory", timer="gpu")
            return SimpleNamespace(plan_timing=None, out_dir=str(run), figures=figures)

        return point


def _task(node_root: Path | None, make_point: _Point) -> dict[str, Any]:
    from kbench import sweep_ray

    return sweep_ray.task({"mode": "event"}, "v1", {"s": "1"}, [], None if node_root is None else str(node_root),
                          "k-sweep", False, make_point)  # fmt: skip


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task's ``where`` without Ray (it asks Ray which GPU the task has)."""
    from kbench import sweep_ray

    monkeypatch.setattr(sweep_ray, "where", lambda: dict(HERE))


@pytest.mark.usefixtures("here")
@pytest.mark.parametrize("plant", ["another owner", "open to others", "a link", "under a folder others may write"])
def test_a_node_folder_another_user_could_change_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plant: str
) -> None:
    """The review's attack: another user owns the node root (/tmp/kbench-ray), so they can swap the run folder made in
    it for one of links, which the task then reads (root's 0600 files) or writes through. The task refuses such a
    node root before a point runs: its row says why in one line."""
    from kbench import fsutil

    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    root = tmp_path / "node"
    if plant == "another owner":
        root.mkdir(mode=0o700)
        if os.geteuid() == 0:
            os.chown(root, STRANGER, STRANGER)
        else:
            monkeypatch.setattr(fsutil, "me", lambda: os.getuid() + STRANGER)
    elif plant == "open to others":
        root.mkdir()
        root.chmod(0o777)
    elif plant == "a link":
        root.symlink_to(theirs, target_is_directory=True)
    else:
        theirs.chmod(0o777)  # no sticky bit: anyone may rename what is in it
        root = theirs / "node"
    point = _Point()
    got = _task(root, point)
    status = got["row"]["status"]
    assert point.calls == 0 and status.startswith("failed: the Ray node folder"), status
    assert len(status.splitlines()) == 1 and got["row"]["code"] == 4 and got["files"] == {}
    assert "rel" not in got and not (theirs / "k-sweep").exists() and not (tmp_path / "node" / "k-sweep").exists()


@pytest.mark.usefixtures("here")
def test_the_default_node_folder_is_the_users_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default each user has a node folder of their own under the temporary folder, made private (0700): the
    shared name the review's attacker owned (kbench-ray) is not used."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = tmp_path / "kbench-ray"  # as the attacker left it, owned by them
    shared.mkdir()
    shared.chmod(0o777)
    got = _task(None, _Point())
    mine = tmp_path / f"kbench-ray-{os.geteuid()}"
    assert got["row"]["status"] == "ok" and got["rel"] == "event/k/s1/20261125T000000Z"
    assert (mine / "k-sweep" / got["rel"] / "report.md").is_file() and list(shared.iterdir()) == []
    assert (mine.stat().st_mode & 0o777, (mine / "k-sweep").stat().st_mode & 0o777) == (0o700, 0o700)


@pytest.mark.usefixtures("here")
def test_a_run_folder_comes_home_without_following_links_and_no_more_readable(tmp_path: Path) -> None:
    """The review's first variant: a link in the run folder to a 0600 file outside it came home as a world-readable
    file under --out. Files are collected without following a link (regular files only, nothing outside the run
    folder), and land with no more access than they had on the node."""
    from kbench import sweep_ray

    secret, outside = tmp_path / "secret", tmp_path / "outside"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    outside.mkdir()
    (outside / "planted.json").write_text("{}")

    def plant(run: Path) -> None:
        (run / "stolen.md").symlink_to(secret)  # a link to a file
        (run / "tiling").symlink_to(outside, target_is_directory=True)  # a link to a folder
        os.mkfifo(run / "pipe")  # would block a plain read
        (run / "sub").mkdir()
        (run / "sub" / "mine.json").write_text("[]")
        (run / "private.json").write_text("{}")
        (run / "private.json").chmod(0o600)
        (run / "report.md").chmod(0o644)

    got = _task(tmp_path / "node", _Point(plant))
    assert sorted(got["files"]) == ["private.json", "report.md", "sub/mine.json"], sorted(got["files"])
    assert got["modes"]["private.json"] == 0o600 and got["modes"]["report.md"] == 0o644
    row = sweep_ray.landed(got, tmp_path / "home")
    run = Path(row.run or "")
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file()) == [
        "placement.json", "private.json", "report.md", "sub/mine.json"]  # fmt: skip
    assert (run / "private.json").stat().st_mode & 0o777 == 0o600  # old: 0644, readable by every user
    assert (run / "report.md").stat().st_mode & 0o777 == 0o644 & ~_umask()
    assert all("root only" not in p.read_text() for p in run.rglob("*") if p.is_file())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_file_whose_mode_the_task_did_not_give_lands_private(tmp_path: Path) -> None:
    from kbench import sweep_ray

    row = sweep.Row(version="v1", params={"s": "1"}, status="ok", run="/node/x")
    got = {"row": row.model_dump(mode="json"), "rel": "event/k/s1/20261125T000000Z", "where": HERE,
           "files": {"a.json": b"{}", "b.md": b"r"}, "modes": {"b.md": 0o4777}, "left": []}  # fmt: skip
    run = Path(sweep_ray.landed(got, tmp_path / "home").run or "")
    assert (run / "a.json").stat().st_mode & 0o7777 == 0o600
    assert (run / "b.md").stat().st_mode & 0o7777 == 0o666 & ~_umask()  # never setuid, never more than the umask


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--executor", "ray", "--gpus", "0"], "--gpus is the local executor's"),
        (["--fetch-captures"], "go with --executor ray"),
        (["--executor", "slurm"], "--executor slurm: one of local, ray"),
    ],
)
def test_bad_executor_options_are_one_line(
    cli: Callable[..., Ran], isolated: Path, args: list[str], fragment: str
) -> None:
    done = cli("sweep", "mla_decode", "base", "--s=1,2", *args, "--out", "p", "--sweep-out", "s")
    assert done.returncode == 2 and fragment in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_cli_runs_points_on_the_cluster_it_joined(cluster: Any, cli: Callable[..., Ran], isolated: Path) -> None:
    """The real event mode in CPU workers: every point is a row with the no-GPU line, and the table says where each
    ran."""
    done = cli("sweep", "mla_decode", "base", "--s=1,2", "--executor", "ray", "--out", "p", "--sweep-out", "s")
    assert done.returncode == 3, done.stderr  # no point ran: no GPU, as one profile would say
    [folder] = list((isolated / "s" / "mla_decode").iterdir())
    rows = sweep.done_rows(folder)
    assert len(rows) == 2 and all(r.status.startswith("failed: --prof_type=event needs a CUDA GPU") for r in rows)
    assert "## Where the points ran (Ray)" in done.stdout and "2 point(s) finished, 2 not ok" in done.stderr
