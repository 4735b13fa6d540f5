"""What kbench reads back from folders another user or a checked-out repo can write (issue 41): the report template
cache, the shared state folder with its GPU lock files and clock records, names read from result.json and the
autotune cache. Each test plants what an attacker would and checks that nothing runs, nothing outside is written and
nothing forged is believed. Another user's ownership is simulated through fsutil.trusted_uids, and, where the tests
run as root, also made real with os.chown to an unused uid."""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kbench import fsutil
from kbench.capture import clocks, gpulock
from kbench.errors import ConfigError, UsageError
from tests.clock_fakes import FakeClocks
from tests.conftest import DATA, Ran

IS_ROOT = os.geteuid() == 0
STRANGER = 54321  # a uid no account on a test machine has
as_root = pytest.mark.skipif(not IS_ROOT, reason="makes another user's file for real (os.chown needs root)")


# -- the report template cache -----------------------------------------------------------------------------------------
class _Mkdir:
    """Unpickling this creates a folder: the proof that a planted cache file ran code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable[[str], None], tuple[str]]:
        return os.mkdir, (str(self.path),)


def _plant_template_cache(folder: Path, marker: Path) -> list[Path]:
    """What a repo could ship in .cache/report-templates/: jinja2's bytecode file of every report template (its
    cache key and header right), holding a pickle that creates ``marker`` when loaded."""
    import jinja2
    from jinja2.bccache import bc_magic

    from kbench.report import render

    env = render.environment()
    assert env.loader is not None
    folder.mkdir(parents=True, exist_ok=True)
    planted = []
    for name in env.list_templates():
        filename = env.loader.get_source(env, name)[1]
        path = folder / f"{jinja2.BytecodeCache().get_cache_key(name, filename)}.cache"
        path.write_bytes(bc_magic + pickle.dumps(_Mkdir(marker)))
        planted.append(path)
    return planted


@pytest.fixture
def fresh_templates() -> Iterator[None]:
    """The template environment built anew, as in a new process, before and after the test."""
    from kbench.report import render

    render.environment.cache_clear()
    yield
    render.environment.cache_clear()


@pytest.mark.parametrize("where", ["the working folder's .cache", "KBENCH_CACHE_DIR"])
def test_a_planted_template_cache_never_runs(
    where: str, isolated: Path, fresh_templates: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbench.report import render

    if where == "KBENCH_CACHE_DIR":
        monkeypatch.setenv("KBENCH_CACHE_DIR", str(isolated / "shared-cache"))
        folder = isolated / "shared-cache" / "report-templates"
    else:
        monkeypatch.delenv("KBENCH_CACHE_DIR")
        folder = isolated / ".cache" / "report-templates"
    marker = isolated / "ran-planted-code"
    planted = _plant_template_cache(folder, marker)
    env = render.environment()
    for name in env.list_templates():
        env.get_template(name)
    assert not marker.exists()
    assert sorted(folder.iterdir()) == sorted(planted)  # nothing read there, nothing written there either


# -- the state folder --------------------------------------------------------------------------------------------------
@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state folder shaped like /tmp/kbench-state: world-writable with the sticky bit."""
    folder = tmp_path / "state"
    folder.mkdir()
    folder.chmod(0o1777)
    monkeypatch.setenv("KBENCH_STATE_DIR", str(folder))
    return folder


def _refused(text: str) -> pytest.RaisesExc[ConfigError]:
    """One clear refusal (exit 4) whose line holds ``text``."""
    return pytest.raises(ConfigError, match=re.escape(text))


def test_a_symlinked_state_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "state").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("KBENCH_STATE_DIR", str(tmp_path / "state"))
    with _refused(f"the state folder {tmp_path / 'state'} is a symbolic link") as e:
        fsutil.state_dir()
    assert e.value.exit_code == 4 and len(str(e.value).splitlines()) == 1
    assert "KBENCH_STATE_DIR" in str(e.value)


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_state_folder_others_may_write_needs_the_sticky_bit(state: Path, mode: int) -> None:
    state.chmod(mode)
    with _refused(f"{state} is writable by others without the sticky bit"):
        fsutil.state_dir()
    state.chmod(mode | 0o1000)
    assert fsutil.state_dir() == state


def test_another_users_state_folder_is_refused(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsutil, "trusted_uids", lambda: frozenset({STRANGER}), raising=False)
    with _refused(f"{state} belongs to uid {os.geteuid()}, neither you nor root"):
        fsutil.state_dir()


@as_root
def test_another_users_state_folder_is_refused_for_real(state: Path) -> None:
    os.chown(state, STRANGER, STRANGER)
    with _refused(f"{state} belongs to uid {STRANGER}, neither you nor root"):
        fsutil.state_dir()


def test_a_missing_state_folder_is_made_to_be_shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBENCH_STATE_DIR", str(tmp_path / "new" / "state"))
    assert fsutil.state_dir() == tmp_path / "new" / "state"
    assert (tmp_path / "new" / "state").stat().st_mode & 0o7777 == 0o1777


@pytest.fixture
def raced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A state folder name that is free when kbench looks, and a link to a victim folder (/etc in the attack) that
    another user plants there just after the look, before kbench makes the folder."""
    victim, state = tmp_path / "victim", tmp_path / "state"
    victim.mkdir()
    victim.chmod(0o755)
    monkeypatch.setenv("KBENCH_STATE_DIR", str(state))
    return victim, state


def test_a_link_planted_while_the_state_folder_is_made_is_never_chmodded(
    raced: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    victim, state = raced
    real_exists, real_is_symlink = Path.exists, Path.is_symlink

    def looked_before_the_link(name: str) -> Callable[[Path], bool]:
        real = real_exists if name == "exists" else real_is_symlink

        def seen(self: Path, *args: Any, **kwargs: Any) -> bool:
            if self == state:  # kbench's look at the name came before the attacker's link
                return False
            return real(self, *args, **kwargs)

        return seen

    state.symlink_to(victim, target_is_directory=True)
    monkeypatch.setattr(Path, "exists", looked_before_the_link("exists"))
    monkeypatch.setattr(Path, "is_symlink", looked_before_the_link("is_symlink"))
    with _refused(f"the state folder {state} is a symbolic link"):
        fsutil.state_dir()
    assert victim.stat().st_mode & 0o7777 == 0o755


@as_root
def test_the_lock_script_never_chmods_a_link_planted_while_it_makes_the_state_folder(
    raced: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.clock_fakes import install_fake_smi

    victim, state = raced
    smi, log = install_fake_smi(tmp_path)
    monkeypatch.setenv("NVIDIA_SMI", str(smi))
    monkeypatch.setenv("FAKE_SMI_LOG", str(log))
    # a mkdir that lets the attacker's link in first: the script's look at the name came before it
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "mkdir").write_text(f'#!/bin/sh\n[ -L "{state}" ] || ln -s "{victim}" "{state}"\nexec /bin/mkdir "$@"\n')
    (shim / "mkdir").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    script = Path(__file__).parents[1] / "scripts" / "lock-gpu-clock.sh"
    done = subprocess.run(["bash", str(script), "--gpu", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "is a symbolic link" in done.stderr, done.stderr
    assert victim.stat().st_mode & 0o7777 == 0o755


# -- the GPU lock files ------------------------------------------------------------------------------------------------
@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file the attacker wants truncated or made world-writable (/etc/passwd in the review)."""
    path = tmp_path / "victim"
    path.write_text("precious\n")
    path.chmod(0o600)
    return path


def _untouched(victim: Path) -> bool:
    return victim.read_text() == "precious\n" and victim.stat().st_mode & 0o7777 == 0o600


@pytest.mark.parametrize("plant", ["symlink", "hard link"])
def test_a_lock_file_leading_elsewhere_is_never_written(state: Path, victim: Path, plant: str) -> None:
    lock = state / "gpu0.lock"
    if plant == "symlink":
        lock.symlink_to(victim)
    else:
        os.link(victim, lock)
    with _refused(f"{lock} is not a plain file of its own") as e, gpulock.exclusive(0, wait=False):
        pass
    assert e.value.exit_code == 4 and _untouched(victim)


def test_a_fifo_as_lock_file_is_refused_not_a_crash(state: Path) -> None:
    os.mkfifo(state / "gpu0.lock")
    with _refused("gpu0.lock is not a plain file of its own"), gpulock.exclusive(0, wait=False):
        pass


def test_an_own_lock_file_is_left_for_whoever_comes_next(state: Path) -> None:
    with gpulock.exclusive(0, wait=False):
        info = json.loads((state / "gpu0.lock").read_text())
        assert info["pid"] == os.getpid()
    assert (state / "gpu0.lock").stat().st_mode & 0o777 == 0o666 and (state / "gpu0.lock").read_text() == ""


@as_root
def test_another_users_lock_file_keeps_its_mode(state: Path) -> None:
    lock = state / "gpu0.lock"
    lock.write_text("")
    lock.chmod(0o644)
    os.chown(lock, STRANGER, STRANGER)
    with gpulock.exclusive(0, wait=False):
        pass
    assert lock.stat().st_mode & 0o7777 == 0o644 and lock.stat().st_uid == STRANGER


@as_root
@pytest.mark.parametrize("plant", ["symlink", "fifo"])
def test_another_users_entry_at_the_lock_file_is_passed_over_not_a_denial(
    state: Path, victim: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    plant: str,
) -> None:  # fmt: skip
    """issue 50: a link another user planted at gpu0.lock stopped every other user's GPU runs (exit 4, "remove it"),
    and they could not remove it (the sticky bit). Such an entry is passed over: the run holds a lock of its user's
    own, says so in one line, and the same user's runs still wait for each other."""
    lock = state / "gpu0.lock"
    if plant == "symlink":
        lock.symlink_to(victim)
    else:
        os.mkfifo(lock)
    os.lchown(lock, STRANGER, STRANGER)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    with caplog.at_level(logging.WARNING, logger="kbench.capture.gpulock"), gpulock.exclusive(0, wait=False):
        own = tmp_path / "run" / "kbench" / "gpu0.lock"
        assert json.loads(own.read_text())["pid"] == os.getpid()
        with pytest.raises(gpulock.GpuBusy), gpulock.exclusive(0, wait=False):  # this user's next run waits
            pass
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and all(f"{lock} " in m and "belongs to uid 54321" in m for m in said), said
    assert "holding a lock of your own" in said[0] and len(said[0].splitlines()) == 1
    assert _untouched(victim) and lock.is_symlink() == (plant == "symlink") and lock.lstat().st_uid == STRANGER
    assert (tmp_path / "run" / "kbench").stat().st_mode & 0o777 == 0o700


@as_root
def test_another_users_entry_and_no_private_folder_is_one_line(
    state: Path, victim: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = state / "gpu0.lock"
    lock.symlink_to(victim)
    os.lchown(lock, STRANGER, STRANGER)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: not a place for a private folder
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    with _refused("is a symbolic link and is not yours to remove") as e, gpulock.exclusive(0, wait=False):
        pass
    assert "KBENCH_STATE_DIR" in str(e.value) and len(str(e.value).splitlines()) == 1 and _untouched(victim)


# -- the clock records -------------------------------------------------------------------------------------------------
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


def _forge(state: Path, how: str, owner: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A gpu0.clocks record kbench must not believe: written by someone else, through a link, or writable by all."""
    text = f"owner={owner}\npid={_dead_pid()}\nsm_mhz=1410\nmem_mhz=2619\nsince=2026-11-22T10:00:00Z\n"
    record = state / "gpu0.clocks"
    if how == "symlink":
        (tmp_path / "elsewhere.clocks").write_text(text)
        (tmp_path / "elsewhere.clocks").chmod(0o644)
        record.symlink_to(tmp_path / "elsewhere.clocks")
        return
    record.write_text(text)
    record.chmod(0o666 if how == "writable by all" else 0o644)
    if how == "another user (simulated)":  # the folder, mine too, is taken as checked (its tests are above)
        monkeypatch.setattr(clocks, "state_dir", lambda: state)
        monkeypatch.setattr(fsutil, "trusted_uids", lambda: frozenset({STRANGER}), raising=False)
    elif how == "another user":
        os.chown(record, STRANGER, STRANGER)


FORGERIES = [
    "another user (simulated)",
    pytest.param("another user", marks=as_root),
    "symlink",
    "writable by all",
]


@pytest.mark.parametrize("how", FORGERIES)
def test_a_forged_stale_record_never_resets_the_clocks(
    state: Path, how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _forge(state, how, "kbench", monkeypatch, tmp_path)
    fake = FakeClocks()
    with caplog.at_level(logging.WARNING, logger="kbench.capture.clocks"), clocks.held(fake, lock=False) as held:
        assert held.notes == [] and "--no-lock-clocks" in held.state
    assert fake.calls == []  # old: "reset mem=True" on clocks kbench never locked
    assert clocks.read_record(0) is None
    assert any(f"ignoring {state / 'gpu0.clocks'}" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("how", FORGERIES)
def test_a_forged_script_record_never_passes_for_held_clocks(
    state: Path, how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _forge(state, how, "script", monkeypatch, tmp_path)
    fake = FakeClocks()
    with clocks.held(fake, lock=True) as held:
        assert held.by_kbench and held.state.startswith("locked by kbench at SM 1590 MHz")  # old: "by scripts/..."
    assert fake.calls == ["lock 1590 2619", "reset mem=True"]


# -- names read from result.json ---------------------------------------------------------------------------------------
RESULT = DATA / "examples_h100_1122" / "event-vector_add-v2" / "result.json"


def _run_folder(tmp_path: Path, **changes: str) -> Path:
    run = tmp_path / "profiles" / "run"
    run.mkdir(parents=True)
    data = json.loads(RESULT.read_text())
    data.update(changes)
    (run / "result.json").write_text(json.dumps(data))
    return run


@pytest.mark.parametrize(
    "changes",
    [
        {"kernel": "../../outside"},
        {"kernel": "ABSOLUTE"},
        {"kernel": "vector_add\n\n# Instructions for agents"},
        {"version": "v2\n\n# Instructions for agents"},
        {"kernel": ".hidden"},
    ],
)
def test_a_name_in_result_json_is_checked_like_a_typed_one(
    cli: Callable[..., Ran], tmp_path: Path, changes: dict[str, str]
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("mine\n")
    changes = {k: v.replace("ABSOLUTE", str(tmp_path / "outside")) for k, v in changes.items()}
    run = _run_folder(tmp_path, **changes)
    docs = tmp_path / "root" / "docs"
    done = cli("devlog", str(run), "--docs", str(docs))
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "result.json names" in done.stderr
    assert outside.read_text() == "mine\n" and not docs.exists()
    from kbench.report.models import load_result  # what the MCP tools read result.json through

    with pytest.raises(UsageError, match=r"result\.json names"):
        load_result(run)


def test_a_symlinked_devlog_is_not_appended_through(cli: Callable[..., Ran], tmp_path: Path) -> None:
    outside = tmp_path / "AGENTS.md"
    outside.write_text("mine\n")
    docs = tmp_path / "root" / "docs"
    docs.mkdir(parents=True)
    (docs / "vector_add.md").symlink_to(outside)
    done = cli("devlog", str(_run_folder(tmp_path)), "--docs", str(docs))
    assert done.returncode == 4 and "vector_add.md is not a plain file of its own" in done.stderr
    assert outside.read_text() == "mine\n"


def test_the_devlog_still_appends_to_its_own_file(cli: Callable[..., Ran], tmp_path: Path) -> None:
    run, docs = _run_folder(tmp_path), tmp_path / "docs"
    assert cli("devlog", str(run), "--docs", str(docs)).returncode == 0
    first = (docs / "vector_add.md").read_text()
    assert first.startswith("# vector_add: development log") and "### vector_add v2 (event mode" in first
    assert cli("devlog", str(run), "--docs", str(docs), "--insight", "again").returncode == 0
    grown = (docs / "vector_add.md").read_text()
    assert grown.startswith(first) and grown.count("### vector_add v2") == 2 and "- again" in grown
    assert "vs Previous: vs v2" in grown[len(first) :]


@pytest.mark.parametrize("command", ["compare", "devlog"])
def test_a_symlinked_result_json_is_never_read(cli: Callable[..., Ran], tmp_path: Path, command: str) -> None:
    """README: a run's result.json is never read from a symbolic link (a planted one may lead to any file the user
    can read); compare and devlog refuse it in one line as a run folder kbench did not write."""
    run = _run_folder(tmp_path)
    outside = tmp_path / "elsewhere.json"
    (run / "result.json").rename(outside)
    (run / "result.json").symlink_to(outside)
    docs = tmp_path / "docs"
    args = [str(run), str(_run_folder(tmp_path / "b"))] if command == "compare" else [str(run), "--docs", str(docs)]
    done = cli(command, *args)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "result.json" in done.stderr
    assert not docs.exists()


# -- the autotune cache (JSON: it can only choose among the plan's configs) --------------------------------------------
def test_a_cached_config_is_the_plans_own_never_the_files(tmp_path: Path) -> None:
    from kbench.plan import autotune

    space = [{"BLOCK": 64}, {"BLOCK": 128}]
    path = autotune.entry_path(tmp_path, "../dev", "..", "/v", "stage", "../../n")
    assert path.resolve().is_relative_to(tmp_path.resolve())  # names from anywhere never leave the cache root
    autotune.tune(space, lambda cs: [[float(c["BLOCK"])] for c in cs], path, "t")
    data = json.loads(path.read_text())
    data["best"] = {"BLOCK": 128.0}  # equal to 128 in Python, but a float Triton would specialise on
    path.write_text(json.dumps(data))
    r = autotune.tune(space, lambda cs: pytest.fail("re-tuned"), path, "t")
    assert r.source == "cache" and r.best == {"BLOCK": 128} and type(r.best["BLOCK"]) is int


@pytest.fixture
def linked_cache(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A cache root whose package folder is a link planted to a folder elsewhere, which holds an entry of the same
    name (what a re-tune would overwrite and a failed check delete); the root, the entry by its cache name, and the
    entry elsewhere."""
    from kbench.plan import autotune

    root, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    (elsewhere / "v2" / "stage").mkdir(parents=True)
    (root / "H100_SXM").mkdir(parents=True)
    (root / "H100_SXM" / "pkg").symlink_to(elsewhere, target_is_directory=True)
    path = autotune.entry_path(root, "H100_SXM", "pkg", "v2", "stage", "n1")
    victim = elsewhere / "v2" / "stage" / "n1.json"
    victim.write_text("precious\n")
    return root, path, victim


def test_a_retune_never_writes_through_a_link_below_the_cache_root(
    linked_cache: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    from kbench.plan import autotune

    _, path, victim = linked_cache
    with caplog.at_level(logging.WARNING):
        r = autotune.tune([{"BLOCK": 64}, {"BLOCK": 128}], lambda cs: [[float(c["BLOCK"])] for c in cs], path, "t")
    assert r.source == "tuned" and r.best == {"BLOCK": 64} and r.path is None
    assert victim.read_text() == "precious\n" and sorted(victim.parent.iterdir()) == [victim]
    assert any("symbolic link" in m for m in caplog.messages), caplog.messages


def test_a_cache_root_that_is_itself_a_link_is_still_used(tmp_path: Path) -> None:
    """KBENCH_CACHE_DIR (or .cache) pointed at a scratch disk by its user: the root, not a folder kbench made."""
    from kbench.plan import autotune

    (tmp_path / "scratch").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "scratch", target_is_directory=True)
    path = autotune.entry_path(tmp_path / "cache" / "kernel-autotune", "H100_SXM", "pkg", "v2", "stage", "n1")
    autotune.tune([{"BLOCK": 64}, {"BLOCK": 128}], lambda cs: [[float(c["BLOCK"])] for c in cs], path, "t")
    assert (tmp_path / "scratch" / path.relative_to(tmp_path / "cache")).is_file() and autotune.forget(path)


def test_forget_never_deletes_through_a_link_below_the_cache_root(linked_cache: tuple[Path, Path, Path]) -> None:
    """The link planted after the entry was tuned (a tune takes minutes): the failed check's forget leaves it."""
    from kbench.plan import autotune

    _, path, victim = linked_cache
    assert not autotune.forget(path) and victim.read_text() == "precious\n"


# -- the working folder of the processes kbench starts -----------------------------------------------------------------
@pytest.fixture
def planted_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder (a checked-out repo) holding a `kbench` package of its own, which leaves a marker when
    imported: a `python -m ...` started there would import it before kbench's own. The marker's path."""
    folder, marker = tmp_path / "repo", tmp_path / "ran-planted-code"
    (folder / "kbench").mkdir(parents=True)
    (folder / "kbench" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(1)\n")
    monkeypatch.chdir(folder)
    return marker


@pytest.mark.slow
def test_the_mcp_check_tool_imports_nothing_from_the_servers_working_folder(planted_cwd: Path) -> None:
    from kbench.cli.mcp_server import build
    from tests.test_mcp_bounds import calls

    (answer,) = calls(build(), [("check", {"kernel": "vector_add", "version": "base", "params": {"n": 64}})])
    assert not answer.is_error and (answer.structured_content or {})["passed"], answer.content
    assert not planted_cwd.exists()


@pytest.mark.slow
def test_a_profile_child_imports_nothing_from_the_working_folder(planted_cwd: Path) -> None:
    from kbench import api
    from kbench.plan.discovery import load_version

    plan = load_version("vector_add", "base").from_values({"n": "64"})
    result = api.profile_plan("access", plan, out_dir="out")  # the access child: python -m kbench.capture...
    assert result.out_dir and not planted_cwd.exists()


@pytest.mark.parametrize("safe_flag", [True, False])
def test_both_ways_of_starting_python_keep_the_working_folder_off_its_path(planted_cwd: Path, safe_flag: bool) -> None:
    """-P on Python 3.11 and later; before that the folder is dropped from sys.path before the module is found."""
    from kbench.capture.tools import python_module

    done = subprocess.run(
        python_module("kbench", "--help", safe_flag=safe_flag), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "kbench" in done.stdout, done.stderr
    assert not planted_cwd.exists()


def test_what_another_holder_wrote_in_the_lock_file_is_shown_as_plain_text(state: Path) -> None:
    """Whoever holds the GPU writes the holder line kbench shows (another user may): no terminal escapes, no line
    breaks, and not a page of it."""
    import fcntl

    lock = state / "gpu0.lock"
    lock.write_text(
        json.dumps({"pid": 1, "command": "\x1b]0;owned\x07\x1b[2J" + "x" * 5_000 + "\nkbench: ok", "since": "now"})
    )
    with lock.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(gpulock.GpuBusy) as e, gpulock.exclusive(0, wait=False):
            pass
    said = str(e.value)
    assert said.startswith("GPU 0 is busy: kbench pid 1 (`") and said.isprintable() and len(said) < 600, said


@pytest.mark.slow
def test_access_pictures_replace_a_link_at_their_name_never_write_through_it(
    cli: Callable[..., Ran], tmp_path: Path
) -> None:
    """`kbench check --access-pictures DIR` into a folder others share (/tmp/pics): a link planted at a picture's
    name (vector_add-base-a.png -> ~/.bashrc) is replaced by the picture, its target left as it was."""
    pictures, victim = tmp_path / "pics", tmp_path / "rc"
    pictures.mkdir()
    victim.write_text("precious\n")
    (pictures / "vector_add-base-a.png").symlink_to(victim)
    done = cli("check", "vector_add", "base", "--n=64", "--access-pictures", str(pictures))
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious\n"
    assert (pictures / "vector_add-base-a.png").read_bytes().startswith(b"\x89PNG")


def test_a_file_kbench_writes_takes_the_umask_of_the_moment(tmp_path: Path) -> None:
    """One process under several umasks (the resident serves each caller in its own): each write takes the one in
    force, never the first one seen."""
    old = os.umask(0o022)
    try:
        fsutil.write_text_atomic(tmp_path / "a", "a")
        os.umask(0o077)
        fsutil.write_text_atomic(tmp_path / "b", "b")
    finally:
        os.umask(old)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o644 and (tmp_path / "b").stat().st_mode & 0o777 == 0o600


def _as_nobody(state: Path, code: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """Python ``code`` run for real as a second user (nobody), with ``state`` as its state folder (and ``extra`` in
    its environment)."""
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "KBENCH_STATE_DIR": str(state), "PYTHONPATH": f"{repo / 'src'}:{repo}", **extra}
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
        capture_output=True, text=True, timeout=120, env=env, cwd=repo,
    )  # fmt: skip


@pytest.fixture
def shared_state() -> Iterator[Path]:
    """A state folder as /tmp/kbench-state is (1777), where a second user (nobody) can reach it."""
    import shutil
    import tempfile

    state = Path(tempfile.mkdtemp(prefix="kbench-state-"))
    state.chmod(0o1777)
    yield state
    shutil.rmtree(state)


@pytest.fixture
def nobodys_runtime() -> Iterator[Path]:
    """A private folder of nobody's (its XDG_RUNTIME_DIR), where nobody can reach it."""
    import shutil
    import tempfile

    runtime = Path(tempfile.mkdtemp(prefix="kbench-runtime-"))
    os.chown(runtime, 65534, 65534)
    yield runtime
    shutil.rmtree(runtime)


@as_root
@pytest.mark.parametrize("mode", [0o644, 0o600])
def test_another_users_unwritable_lock_file_is_shared_or_passed_over(
    shared_state: Path, nobodys_runtime: Path, mode: int
) -> None:
    """A lock file another user left unwritable in the shared folder: the next user still takes the lock where it
    may read the file (flock needs no write access), and nothing is written to that user's file; where it may not
    even read it (issue 50: every other user's GPU runs stopped, and none could remove it), the run holds a lock of
    its own in its private folder and one line names the file and its owner. Run for real as a second user."""
    lock = shared_state / "gpu0.lock"
    lock.write_text("")
    lock.chmod(mode)
    os.chown(lock, STRANGER, STRANGER)
    runtime = nobodys_runtime
    take = (
        "from kbench.capture import gpulock\nfrom kbench.errors import ConfigError\ntry:\n"
        "    with gpulock.exclusive(0, wait=False):\n        print('held')\n"
        "except ConfigError as e:\n    print(e)\n"
    )
    done = _as_nobody(shared_state, take, XDG_RUNTIME_DIR=str(runtime))
    assert done.returncode == 0 and done.stdout == "held\n", (done.stdout, done.stderr)
    if mode == 0o644:
        assert done.stderr == "" and not (runtime / "kbench").exists()
    else:
        [said] = done.stderr.splitlines()
        assert f"{lock} lets no one else open it and belongs to uid {STRANGER}" in said, said
        assert (runtime / "kbench" / "gpu0.lock").stat().st_uid == 65534
    assert lock.read_text() == "" and lock.stat().st_uid == STRANGER


@as_root
def test_another_users_clock_record_never_stops_a_profile(shared_state: Path) -> None:
    """A user who plants gpu0.clocks in the shared state folder makes the next user's record unwritable (a sticky
    folder: no one renames over another's file). That user's profile runs with its clocks not locked, saying why;
    it does not fail. Run for real as a second user (nobody)."""
    planted = shared_state / "gpu0.clocks"
    planted.write_text("owner=script\npid=1\nsm_mhz=1410\nmem_mhz=none\nsince=now\n")
    os.chown(planted, STRANGER, STRANGER)
    held = (
        "from kbench.capture import clocks\nfrom tests.clock_fakes import FakeClocks\n"
        "with clocks.held(FakeClocks(permitted=False), lock=True) as s:\n    print(s.state)\n"
    )
    done = _as_nobody(shared_state, held)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("not locked (") and str(planted) in done.stdout, done.stdout
    assert planted.stat().st_uid == STRANGER


def test_a_clock_record_is_made_readable_before_it_is_named_never_after(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record is made 0644 (others' kbench reads root's) through its own descriptor before the rename: a chmod by
    name after it followed whatever stood at the name by then (a link put there in a folder its owner lets others
    change: /etc/shadow made world-readable, as root)."""
    victim = tmp_path / "shadow"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    real_replace = Path.replace

    def swapped(self: Path, target: Any) -> Path:  # the record is renamed, then swapped for a link at once
        done = real_replace(self, target)
        if Path(target).name == "gpu0.clocks":
            Path(target).unlink()
            Path(target).symlink_to(victim)
        return done

    monkeypatch.setattr(Path, "replace", swapped)
    clocks.write_record(0, clocks.LockRecord("kbench", os.getpid(), 1410, None, "now"))
    assert victim.stat().st_mode & 0o777 == 0o600


def test_the_path_dropping_start_imports_runpy_only_after_the_working_folder_left(tmp_path: Path) -> None:
    """Before Python 3.11 (no -P) the child's start line drops the working folder from sys.path; it imported runpy
    first, which Python 3.10 reads from the path (3.11 freezes it: -X frozen_modules=off makes it read it there too),
    so a runpy.py planted in the working folder ran."""
    from kbench.capture.tools import python_module

    marker = tmp_path / "ran"
    (tmp_path / "runpy.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    argv = python_module("json.tool", "--help", safe_flag=False)
    argv[1:1] = ["-X", "frozen_modules=off"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
