"""What kbench reads back from folders another user or a checked-out repo can write (issue 41): the report template
cache, the shared state folder with its GPU lock files and clock records, names read from result.json and the
autotune cache. Each test plants what an attacker would and checks that nothing runs, nothing outside is written and
nothing forged is believed. Another user's ownership is simulated through fsutil.trusted_uids, and, where the tests
run as root, also made real with os.chown to an unused uid."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


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
