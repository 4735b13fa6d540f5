"""`kbench clone`: a version module copied into the next with its version-named symbols renamed; the clone registers
and passes the same check as the original (under Triton's CPU interpreter, fp32); nothing is ever overwritten."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kbench.errors import UsageError
from kbench.plan.clone import VERSION_CHARS, clone_source, defined_names, renamed_symbol, version_name
from tests.conftest import DATA, Ran


@pytest.mark.parametrize(
    ("name", "old", "new", "expected"),
    [
        ("mla_v1_kernel", "v1", "v2", "mla_v2_kernel"),
        ("MlaDecodeV1", "v1", "v2", "MlaDecodeV2"),
        ("V1_TILES", "v1", "v2", "V1_TILES".replace("V1", "V2")),
        ("_v1_helper", "v1", "v2", "_v2_helper"),
        ("VectorAddBase", "base", "fused", "VectorAddFused"),
        ("add_kernel", "base", "fused", "add_kernel"),  # no version word: unchanged
        ("v10_kernel", "v1", "v2", "v10_kernel"),  # a longer word that starts like the version: unchanged
    ],
)
def test_version_words_are_renamed_in_their_case_style(name: str, old: str, new: str, expected: str) -> None:
    assert renamed_symbol(name, old, new) == expected


def test_only_symbols_the_module_defines_are_renamed() -> None:
    source = (DATA / "user_kernels_clone" / "scale" / "v1.py").read_text()
    assert {"V1_BLOCK", "scale_v1_kernel", "ScaleV1", "PLAN", "Workspace"} <= set(defined_names(source))
    text, renames = clone_source(source, "scale", "v1", "v2")
    assert renames == {"V1_BLOCK": "V2_BLOCK", "scale_v1_kernel": "scale_v2_kernel", "ScaleV1": "ScaleV2"}
    assert text.startswith('"""scale v2: one program per BLOCK elements."""')
    assert 'kernels=["scale_v2_kernel"]' in text and "PLAN = ScaleV2" in text
    assert not any(old in text for old in renames)
    # layout, comments and every other line unchanged
    assert len(text.splitlines()) == len(source.splitlines())
    changed = [(a, b) for a, b in zip(source.splitlines(), text.splitlines(), strict=True) if a != b]
    assert all("v1" in a.lower() for a, _ in changed)
    # an imported name holding the version is not the module's to rename
    imported, _ = clone_source("from x import v1_thing\n\nv1_copy = v1_thing\n", "p", "v1", "v2")
    assert imported == "from x import v1_thing\n\nv2_copy = v1_thing\n"


@pytest.mark.slow
def test_clone_registers_checks_and_never_overwrites(
    cli: Callable[..., Ran], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernels = tmp_path / "kernels"
    shutil.copytree(DATA / "user_kernels_clone", kernels)
    done = cli("clone", "scale", "v1", "v2", "--kernel-path", str(kernels))
    assert done.returncode == 0, done.stderr
    assert "renamed: V1_BLOCK -> V2_BLOCK, scale_v1_kernel -> scale_v2_kernel, ScaleV1 -> ScaleV2" in done.stdout
    listed = cli("list", "--kernel-path", str(kernels)).stdout
    assert "  v1: " in listed and "  v2: " in listed
    checked = cli("check", "scale", "v2", "--kernel-path", str(kernels))
    assert checked.returncode == 0 and "scale {'BLOCK': 256}: PASS" in checked.stdout

    before = (kernels / "scale" / "v2.py").read_text()
    for args, fragment in [
        (("scale", "v1", "v2"), "exists; kbench clone never overwrites"),
        (("scale", "v9", "v3"), "unknown version 'v9' of scale"),
        (("scale", "v1", "V3-x"), "'V3-x' cannot be a version"),
        (("scale", "v1", "class"), "'class' cannot be a version"),
        (("nosuch", "v1", "v2"), "unknown kernel package 'nosuch'"),
    ]:
        bad = cli("clone", *args, "--kernel-path", str(kernels))
        assert bad.returncode == 2 and fragment in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert (kernels / "scale" / "v2.py").read_text() == before

    # a clone that does not import is removed again, and says why
    (kernels / "scale" / "v1.py").write_text("import no_such_module_anywhere\nPLAN = None\n")
    bad = cli("clone", "scale", "v1", "v3", "--kernel-path", str(kernels))
    assert bad.returncode == 2 and "the clone did not register" in bad.stderr
    assert not (kernels / "scale" / "v3.py").exists()


@pytest.mark.slow
def test_a_shipped_package_is_copied_into_the_kernel_path_with_its_own_kernel_source(
    cli: Callable[..., Ran], tmp_path: Path
) -> None:
    """README's `pip install .` puts the shipped packages in site-packages: a clone must not write there, and a
    version whose kernel lives in a shared helper (matmul v2 -> _triton.py) needs that source to change it."""
    import kbench.kernel.matmul as shipped

    before = sorted(p.name for p in Path(shipped.__path__[0]).iterdir())
    kernels = tmp_path / "kp"
    kernels.mkdir()
    done = cli("clone", "matmul", "v2", "v3", "--kernel-path", str(kernels))
    assert done.returncode == 0, done.stderr
    copy = kernels / "my_matmul"
    assert done.stdout.splitlines() == [
        f"copied the shipped package matmul into {copy} (yours to edit; kbench's stays)",
        f"cloned my_matmul v2 -> v3: {copy / 'v3.py'} (renamed: no version-named symbols)",
        f"edit: {copy / 'v3.py'}, {copy / '_triton_v3.py'}",
        f"profile it: python -m kbench.kernel my_matmul v3 --kernel-path {kernels} --prof_type=event",
    ]
    assert sorted(p.name for p in Path(shipped.__path__[0]).iterdir()) == before  # nothing written into kbench
    assert "from ._triton_v3 import TritonMatmul" in (copy / "v3.py").read_text()
    assert "kbench.kernel.matmul" not in "".join(p.read_text() for p in copy.glob("*.py"))
    assert (copy / "v3.py").read_text().startswith('"""my_matmul v3: ')
    from kbench.plan.discovery import load_version

    v2, v3 = (load_version("my_matmul", v, [str(kernels)]) for v in ("v2", "v3"))
    assert v2.__mro__[1] is not v3.__mro__[1]  # v3's base class comes from its own _triton_v3.py
    checked = cli("check", "my_matmul", "v3", "--kernel-path", str(kernels))
    assert checked.returncode == 0 and checked.stdout.rstrip().endswith("pass"), checked.stderr
    again = cli("clone", "matmul", "v2", "v4", "--kernel-path", str(kernels))
    assert again.returncode == 2 and f"`kbench clone my_matmul <from> <to> --kernel-path {kernels}`" in again.stderr
    assert cli("clone", "my_matmul", "v2", "v4", "--kernel-path", str(kernels)).returncode == 0
    assert (copy / "_triton_v4.py").is_file()
    from_clone = cli("clone", "my_matmul", "v3", "v5", "--kernel-path", str(kernels))  # a clone's own helper
    assert from_clone.returncode == 0 and (copy / "_triton_v5.py").is_file(), from_clone.stderr
    assert "from ._triton_v5 import TritonMatmul" in (copy / "v5.py").read_text()
    assert from_clone.stdout.splitlines()[-1] == (
        f"profile it: python -m kbench.kernel my_matmul v5 --kernel-path {kernels} --prof_type=event"
    )


@pytest.mark.parametrize("name", ["v2\n", "v2\nimport os", "V2", "2v", "class", "v" * (VERSION_CHARS + 1), "v-2"])
def test_a_version_name_is_a_module_name_matched_whole_and_bounded(name: str) -> None:
    with pytest.raises(UsageError) as caught:
        version_name(name)
    assert len(str(caught.value).splitlines()) == 1  # a newline in the name is shown escaped


def test_a_bad_version_name_is_bad_input_not_a_kbench_bug(cli: Callable[..., Ran], tmp_path: Path) -> None:
    kernels = tmp_path / "kernels"
    shutil.copytree(DATA / "user_kernels_clone", kernels)
    for name in ("v2\n", "v" * 300):
        done = cli("clone", "scale", "v1", name, "--kernel-path", str(kernels))
        assert done.returncode == 2 and ("cannot be a version" in done.stderr or "too long" in done.stderr), done.stderr
    assert sorted(p.name for p in (kernels / "scale").iterdir()) == ["__init__.py", "v1.py"]


def test_a_shipped_clone_makes_the_kernel_path_it_writes_into(cli: Callable[..., Ran], isolated: Path) -> None:
    """SKILL.md step 5 in a fresh folder: `--kernel-path kernels` names the user's own destination, made as the default
    ./kernels is; a kernel path that is not there for a user package (nothing to copy into it) is still refused."""
    done = cli("clone", "matmul", "v2", "v3", "--kernel-path", "kernels")
    assert done.returncode == 0, done.stderr
    assert (isolated / "kernels" / "my_matmul" / "v3.py").is_file()
    refused = cli("clone", "my_matmul", "v2", "v4", "--kernel-path", "elsewhere")
    assert refused.returncode == 2 and "kernel path elsewhere is not a folder" in refused.stderr
    assert not (isolated / "elsewhere").exists()
