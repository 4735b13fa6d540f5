"""`kbench sweep` on CPU: mla_decode versions over s and t through a registered backend that 'measures' each stage
at twice its roofline bound (tests/test_pipeline.py's Replay), so the classification follows the roofline and the
bound-flip map must show Memory -> Compute along s; a version that cannot run a point is a row saying why; an
interrupted sweep resumes without re-running what it finished."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from kbench import sweep
from kbench.errors import UsageError
from kbench.modes import registry
from tests.conftest import HAS_CUDA, Ran
from tests.pipeline_fakes import offline_gpu
from tests.test_pipeline import Replay


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch, isolated: Path) -> Iterator[Path]:
    offline_gpu(monkeypatch)
    registry.register(Replay())
    try:
        yield isolated
    finally:
        registry.unregister("replay")


@pytest.mark.slow
def test_a_sweep_writes_the_table_plots_and_the_bound_flip_map(cli: Callable[..., Ran], replay: Path) -> None:
    done = cli(
        "sweep", "mla_decode", "base", "v2", "v1", "--s=1,16", "--t=1024,4096", "--b=32", "--d=48",
        "--prof_type=replay", "--out", "profiles", "--sweep-out", "sweeps",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [folder] = list((replay / "sweeps" / "mla_decode").iterdir())
    rows = list(csv.DictReader((folder / "sweep.csv").read_text().splitlines()))
    assert len(rows) == 3 * 2 * 2
    # d=48 is not a power of two: the Triton versions refuse every point, the PyTorch one runs them
    assert {r["status"] for r in rows if r["version"] == "base"} == {"ok"}
    refused = [r for r in rows if r["version"] != "base"]
    assert all(r["status"].startswith("refused: mla_decode v") and "powers of two" in r["status"] for r in refused)
    base = {(r["s"], r["t"]): r for r in rows if r["version"] == "base"}
    assert base[("1", "4096")]["bottleneck"] == "Memory" and base[("16", "4096")]["bottleneck"] == "Compute"
    assert float(base[("16", "4096")]["roof_pct"]) == pytest.approx(50.0)  # twice the bound
    text = (folder / "sweep.md").read_text()
    assert "- along s (base, t=4096): Memory -> Compute between s=1 and s=16" in text
    assert "- along t (base, s=1): Memory-bound throughout" in text
    assert sorted(p.name for p in (folder / "plots").iterdir()) == ["s.png", "t.png"]
    assert json.loads((folder / "sweep.json").read_text())["versions"] == ["base", "v2", "v1"]
    assert len(list((replay / "profiles" / "replay" / "mla_decode").rglob("report.md"))) == 4


def test_two_versions_that_run_get_a_winner_per_point(cli: Callable[..., Ran], replay: Path) -> None:
    done = cli("sweep", "mla_decode", "base", "v1", "--s=1,4", "--prof_type=replay", "--out", "p", "--sweep-out", "s")
    assert done.returncode == 0, done.stderr
    # the replay times each stage at twice its bound: v1 moves its scores through DRAM, so base wins
    assert "- fastest at s=1: base (" in done.stdout and "x v1)" in done.stdout


def test_an_interrupted_sweep_resumes_from_what_it_finished(replay: Path) -> None:
    spec = {"kernel": "k", "versions": ["a", "b"], "swept": {"s": ["1", "2", "4"]}, "fixed": {}, "mode": "replay",
            "out": "profiles", "bench_runs": 1}  # fmt: skip
    folder = sweep.new_dir(replay / "sweeps", "k")
    calls: list[tuple[str, dict[str, str]]] = []

    def point(version: str, params: dict[str, str]) -> SimpleNamespace:  # a result with what a row reads
        calls.append((version, params))
        if len(calls) == 4:
            raise KeyboardInterrupt
        figures = SimpleNamespace(stages=[], total_us=float(params["s"]), bottleneck="Memory", timer="gpu")
        return SimpleNamespace(plan_timing=None, out_dir="run", figures=figures)

    with pytest.raises(KeyboardInterrupt):
        sweep.run(spec, folder, point, lambda m: None)
    assert len(sweep.done_rows(folder)) == 3
    calls.clear()
    notes: list[str] = []
    rows = sweep.run(sweep.resumed(folder), folder, point, notes.append)
    assert len(calls) == 3 and len(rows) == 6 and notes[0] == "resuming: 3 of 6 point(s) already done"
    assert [r.duration_us for r in rows] == [1.0, 1.0, 2.0, 2.0, 4.0, 4.0]


def _planted_sweep(folder: Path, **spec: object) -> Path:
    """A sweep folder as another user or a repo could leave it: its sweep.json (kbench's keys, any values) and a
    points.jsonl that says every point is done, so that a resume goes straight to the table and the plots."""
    asked = {"kernel": "vector_add", "versions": ["base"], "swept": {"n": ["64", "128"]}, "fixed": {},
             "mode": "access", "out": str(folder.parent / "profiles"), "bench_runs": 1, **spec}  # fmt: skip
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps(asked))
    swept = asked["swept"] if isinstance(asked["swept"], dict) else {}
    lines = [
        json.dumps({"version": "base", "params": {k: v}, "status": "ok", "duration_us": 1.0, "roof_pct": 1.0})
        for k, values in swept.items()
        for v in values
    ]
    (folder / "points.jsonl").write_text("".join(f"{line}\n" for line in lines))
    return folder


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"swept": {"../../../../escaped": ["64", "128"]}}, "'../../../../escaped'"),  # a plot named by it
        ({"swept": {"/abs/escaped": ["64", "128"]}}, "'/abs/escaped'"),
        ({"kernel": "../vector_add"}, "'../vector_add'"),
        ({"versions": ["base\n"]}, "'base\\n'"),
        ({"mode": "nosuch"}, "nosuch"),
        ({"bench_runs": "many"}, "bench_runs"),
        ({"swept": ["n"]}, "swept"),
        ({"mode": None}, "mode"),
    ],
)
def test_a_planted_sweep_folder_is_read_as_data(
    cli: Callable[..., Ran], isolated: Path, spec: dict[str, object], fragment: str
) -> None:
    """--resume reads what the folder's sweep.json asks, names and all, as a typed sweep would be checked: nothing
    in it becomes a file name or path outside the sweep folder, and a malformed one is one line (exit 2), not 70."""
    (isolated / "abs").mkdir()
    planted = _planted_sweep(isolated / "a" / "b" / "c" / "planted", **spec)
    before = sorted(p for p in isolated.rglob("*"))
    done = cli("sweep", "--resume", str(planted))
    assert done.returncode == 2 and fragment in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert sorted(p for p in isolated.rglob("*")) == before


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["mla_decode", "--s=1,,4"], "--s=1,,4: an empty value in the list"),
        (["mla_decode", "--s=1", "--s=2"], "--s is given twice"),
        (["mla_decode", "v99"], "unknown version 'v99' of mla_decode"),
        (["nosuch"], "unknown kernel package 'nosuch'"),
        ([], "name a kernel package to sweep"),
        (["--resume", "/nonexistent"], "no readable sweep.json"),
    ],
)
def test_bad_sweeps_are_one_line(cli: Callable[..., Ran], isolated: Path, args: list[str], fragment: str) -> None:
    done = cli("sweep", *args)
    assert done.returncode == 2 and fragment in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_two_workers_split_the_points_and_the_parent_merges_them(cli: Callable[..., Ran], isolated: Path) -> None:
    """One worker per 'GPU' (two CPU workers here, in access mode, which needs none); every point is done once, by the
    worker its index gives, and the table has them all."""
    done = cli("sweep", "vector_add", "base", "v2", "--n=1024,2048,4096", "--gpus", "0,1", "--prof_type=access",
               "--out", "p", "--sweep-out", "s")  # fmt: skip
    assert done.returncode == 0, done.stderr
    [folder] = list((isolated / "s" / "vector_add").iterdir())
    rows = sweep.done_rows(folder)
    assert len(rows) == 6 and len({r.key() for r in rows}) == 6 and all(r.status == "ok" for r in rows)
    order = sweep.grid(["base", "v2"], {"n": ["1024", "2048", "4096"]}, {})
    for i, (version, params) in enumerate(order):
        row = next(r for r in rows if r.version == version and r.params == params)
        assert row.gpu == str(i % 2)
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("worker-")) == ["worker-0.log", "worker-1.log"]
    assert len(list(csv.DictReader((folder / "sweep.csv").read_text().splitlines()))) == 6


@pytest.mark.skipif(HAS_CUDA, reason="the refusal without a GPU")
@pytest.mark.parametrize("workers", [[], ["--gpus", "0,1"]])
def test_a_sweep_that_needs_a_gpu_stops_before_its_first_point_without_one(
    cli: Callable[..., Ran], isolated: Path, workers: list[str]
) -> None:
    done = cli("sweep", "vector_add", "--n=1024,2048", *workers, "--out", "p", "--sweep-out", "s")
    assert done.returncode == 3
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("kbench: error: kbench sweep --prof_type=event needs a CUDA GPU")
    assert "--prof_type=access" in line
    assert not (isolated / "s").exists() and not (isolated / "p").exists()  # no sweep folder, no point ran


@pytest.mark.parametrize(("gpus", "fragment"), [("0,0", "distinct GPU indices"), ("x", "distinct GPU indices")])
def test_bad_gpu_lists_are_one_line(cli: Callable[..., Ran], isolated: Path, gpus: str, fragment: str) -> None:
    done = cli("sweep", "mla_decode", "--s=1,2", "--gpus", gpus)
    assert done.returncode == 2 and fragment in done.stderr


def test_the_exit_status_says_whether_points_ran() -> None:
    def row(status: str) -> sweep.Row:
        return sweep.Row(version="v", params={"s": status}, status=status)

    assert sweep.outcome([row("ok"), row("refused: d=48")]) == (
        "1 of 2 point(s) ran, 0 failed, 1 refused by their version",
        0,
    )
    assert sweep.outcome([row("ok"), row("failed: boom")])[1] == 6
    assert sweep.outcome([row("refused: x"), row("failed: y")]) == (
        "0 of 2 point(s) ran, 1 failed, 1 refused by their version: no point ran (sweep.md says why, per point)",
        1,
    )
    no_gpu = sweep.Row(version="v", params={"s": "1"}, status="failed: needs a CUDA GPU", code=3)
    assert sweep.outcome([no_gpu, no_gpu.model_copy(update={"params": {"s": "2"}})])[1] == 3
    mixed = [no_gpu, sweep.Row(version="v", params={"s": "2"}, status="failed: crashed", code=5)]
    assert sweep.outcome(mixed)[1] == 1


def test_a_sweep_with_refused_points_says_how_many_ran_in_its_last_line(cli: Callable[..., Ran], replay: Path) -> None:
    done = cli(
        "sweep", "mla_decode", "base", "v2", "--s=1", "--d=48", "--prof_type=replay", "--out", "p", "--sweep-out", "s"
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith("sweep.md; 1 of 2 point(s) ran, 0 failed, 1 refused by their version")
    )


@pytest.mark.slow
def test_an_access_sweep_tabulates_what_the_traces_predict_never_interpreter_time(
    cli: Callable[..., Ran], isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Access mode on a CPU (issue 50): its times are Triton's interpreter's, CPU noise, so the table's figures are what
    each point's trace predicts for the device --device names (predicted time on its roofs, bytes against the model,
    bytes used per sector, masked lanes), the interpreter's time is labelled as such and never compared, the map names
    no fastest version by it, and the plots draw the predictions, not the interpreter's time."""
    from matplotlib.figure import Figure

    seen: list[str] = []
    save = Figure.savefig

    def savefig(fig: Figure, *args: object, **kwargs: object) -> None:
        seen.extend(ax.get_ylabel() for ax in fig.axes)
        save(fig, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Figure, "savefig", savefig)
    done = cli("sweep", "vector_add", "base", "v2", "--n=1024,4096", "--prof_type=access", "--device=A100_SXM4_80GB",
               "--out", "p", "--sweep-out", "s")  # fmt: skip
    assert done.returncode == 0, done.stderr
    [folder] = list((isolated / "s" / "vector_add").iterdir())
    assert json.loads((folder / "sweep.json").read_text())["device"] == "A100_SXM4_80GB"
    rows = list(csv.DictReader((folder / "sweep.csv").read_text().splitlines()))
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    assert all(r["duration_us"] == "" and float(r["interpreter_us"]) > 0 for r in rows)
    assert all(r["tflops"] == r["gbps"] == r["roof_pct"] == "" for r in rows)
    assert all(r["device"] == "NVIDIA A100 SXM4 80GB" and float(r["predicted_us"]) > 0 for r in rows)
    assert all(float(r["sector_use"]) == 32.0 and float(r["masked_pct"]) == 0.0 for r in rows)
    assert all(float(r["requested_bytes"]) == float(r["model_bytes"]) == 12 * int(r["n"]) for r in rows)
    by_n = {r["n"]: float(r["predicted_us"]) for r in rows if r["version"] == "base"}
    assert by_n["4096"] > by_n["1024"]  # the model's time grows with the bytes, whatever the CPU did
    text = (folder / "sweep.md").read_text()
    (head,) = [line for line in text.splitlines() if line.startswith("| version |")]
    cells = [c.strip() for c in head.strip("|").split("|")]
    assert "duration (us)" not in cells and cells[-2] == "interpreter time (us; CPU, not GPU time)"
    for column in ("predicted time (us)", "bytes loaded and stored / model", "bytes used per 32-B sector",
                   "masked lanes (%)", "class (predicted)"):  # fmt: skip
        assert column in cells, cells
    assert "predicts for NVIDIA A100 SXM4 80GB" in text
    assert "- fastest at" not in text and "no fastest version is named" in text
    assert "the same predicted time at n=1024 for base and v2" in text
    assert sorted(p.name for p in (folder / "plots").iterdir()) == ["n.png"]
    assert seen == ["predicted time on NVIDIA A100 SXM4 80GB (us)", "bytes loaded and stored / model",
                    "bytes used per 32-B sector", "masked lanes (%)"]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--prof_type=event", "--device=H100_SXM"), "--device names the device --prof_type=access predicts for"),
        (("--prof_type=access", "--device=B300"), "unknown device 'B300'"),
    ],
)
def test_a_sweep_takes_device_as_the_profile_command_does(
    argv: tuple[str, ...], said: str, cli: Callable[..., Ran], isolated: Path
) -> None:
    done = cli("sweep", "vector_add", "base", "--n=1024", *argv, "--out", "p", "--sweep-out", "s")
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (isolated / "s").exists()


def test_a_resumed_sweep_json_names_a_device_only_for_access_mode(tmp_path: Path) -> None:
    spec = {"kernel": "vector_add", "versions": ["base"], "swept": {}, "fixed": {}, "mode": "event", "out": "p",
            "bench_runs": 1, "device": "H100_SXM"}  # fmt: skip
    (tmp_path / "sweep.json").write_text(json.dumps(spec))
    with pytest.raises(UsageError, match="--device names the device"):
        sweep.resumed(tmp_path)
    (tmp_path / "sweep.json").write_text(json.dumps({**spec, "mode": "access"}))
    assert sweep.resumed(tmp_path)["device"] == "H100_SXM"


def _drawn_axes(rows: list[sweep.Row], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(y label, x label) of every panel sweep_report.plots draws for ``rows`` swept along n, as saved."""
    from matplotlib.figure import Figure

    from kbench import sweep_report

    seen: list[tuple[str, str]] = []
    save = Figure.savefig

    def savefig(fig: Figure, *args: object, **kwargs: object) -> None:
        seen.extend((ax.get_ylabel(), ax.get_xlabel()) for ax in fig.axes)
        save(fig, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Figure, "savefig", savefig)
    assert [p.name for p in sweep_report.plots(rows, ["n"], tmp_path)] == ["n.png"]
    return seen


@pytest.mark.parametrize("access", [False, True])
def test_the_plots_label_their_axes_with_what_they_plot(
    access: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time axis says which time it is (a GPU's duration) whatever the lines are called; a sweep that ran no GPU
    draws what its traces predict for the device, never the interpreter's time (CPU noise) or an empty % of roof."""
    access_facts = {"predicted_us": 2.0, "sector_use": 32.0, "masked_pct": 0.0, "requested_bytes": 8.0,
                    "model_bytes": 8.0, "device": "NVIDIA H100 SXM5 80GB"}  # fmt: skip
    rows = [
        sweep.Row(version=v, params={"n": str(n)}, status="ok", bottleneck="Memory",
                  **({"interpreter_us": 10.0 * n, **access_facts} if access
                     else {"duration_us": 1.0 * n, "roof_pct": 50.0}))
        for v in ("base", "v2") for n in (1024, 4096)
    ]  # fmt: skip
    seen = _drawn_axes(rows, tmp_path, monkeypatch)
    if access:
        assert seen == [("predicted time on NVIDIA H100 SXM5 80GB (us)", "n"), ("bytes loaded and stored / model", "n"),
                        ("bytes used per 32-B sector", "n"), ("masked lanes (%)", "n")]  # fmt: skip
    else:
        assert seen == [("duration (us)", "n"), ("% of roof", "n")]


@pytest.mark.slow
@pytest.mark.parametrize("plant", ["points.jsonl", "sweep.csv", "sweep.md", "plots", "plots/s.png"])
def test_resuming_a_planted_sweep_folder_never_writes_through_its_links(
    cli: Callable[..., Ran], replay: Path, plant: str
) -> None:
    """A sweep folder someone else left (a repo, a shared folder) may hold links where kbench writes: points are
    appended, the table and plots rewritten. A link to ~/.bashrc at points.jsonl got a row naming a parameter value
    '$(cmd)' appended to it, which the next shell ran. Nothing is written through a link; one line says which."""
    done = cli("sweep", "mla_decode", "base", "--s=1,16", "--b=32", "--d=48", "--prof_type=replay",
               "--out", "profiles", "--sweep-out", "sweeps")  # fmt: skip
    assert done.returncode == 0, done.stderr
    [folder] = list((replay / "sweeps" / "mla_decode").iterdir())
    victim = replay / "victim"
    victim.mkdir()
    (victim / "s.png").write_text("precious\n")
    (victim / "rc").write_text("precious\n")
    target = folder / plant
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    target.symlink_to(victim if plant == "plots" else victim / ("s.png" if plant.endswith(".png") else "rc"))
    if plant != "points.jsonl":
        (folder / "points.jsonl").write_text("\n".join((folder / "points.jsonl").read_text().splitlines()[:1]) + "\n")
    again = cli("sweep", "--resume", str(folder))
    assert (victim / "s.png").read_text() == "precious\n" and (victim / "rc").read_text() == "precious\n"
    assert sorted(p.name for p in victim.iterdir()) == ["rc", "s.png"]
    if plant in (
        "points.jsonl",
        "plots",
    ):  # refused in one line (a sweep.md, .csv or picture is replaced, not followed)
        said = [line for line in again.stderr.splitlines() if line.startswith("kbench: error:")]
        assert again.returncode == 4 and len(said) == 1 and "remove it" in said[0], again.stderr


def test_a_workers_log_is_never_written_through_a_link(tmp_path: Path) -> None:
    """--gpus workers log into the (possibly resumed, anyone's) sweep folder: a link at worker-0.log is refused."""
    import sys

    from kbench.capture import tools
    from kbench.errors import ConfigError

    victim = tmp_path / "rc"
    victim.write_text("precious\n")
    (tmp_path / "worker-0.log").symlink_to(victim)
    with pytest.raises(ConfigError, match=r"worker-0\.log is not a plain file of its own"):
        tools.run_all([([sys.executable, "-c", "print(1)"], {}, tmp_path / "worker-0.log")], timeout_s=60)
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("recorded", ["ABSOLUTE", "../victim", "linked/profiles"])
def test_a_resumed_sweep_json_never_picks_where_the_points_go(
    cli: Callable[..., Ran], replay: Path, recorded: str
) -> None:
    """issue 50: --resume took the points' output root from sweep.json unchecked, so a sweep folder someone else left
    could have kbench write run folders anywhere the user may write. The root sweep.json records is used only where
    it lies below this folder (relative, no '..', no link leading out); else one line asks for --out, and --out
    given with --resume says where the points go."""
    done = cli("sweep", "mla_decode", "base", "--s=1,16", "--b=32", "--d=48", "--prof_type=replay",
               "--out", "profiles", "--sweep-out", "sweeps")  # fmt: skip
    assert done.returncode == 0, done.stderr
    [folder] = list((replay / "sweeps" / "mla_decode").iterdir())
    (folder / "points.jsonl").write_text((folder / "points.jsonl").read_text().splitlines()[0] + "\n")
    victim = replay.parent / f"{replay.name}-victim"  # outside the folder the user stands in
    victim.mkdir()
    (replay / "linked").symlink_to(victim, target_is_directory=True)
    asked = json.loads((folder / "sweep.json").read_text())
    asked["out"] = str(victim) if recorded == "ABSOLUTE" else recorded.replace("victim", victim.name)
    (folder / "sweep.json").write_text(json.dumps(asked))
    again = cli("sweep", "--resume", str(folder))
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert "give --out <folder>" in again.stderr and list(victim.iterdir()) == []
    named = cli("sweep", "--resume", str(folder), "--out", "mine")  # the user names the root: the point goes there
    assert named.returncode == 0, named.stderr
    assert len(list((replay / "mine").rglob("report.md"))) == 1 and list(victim.iterdir()) == []
