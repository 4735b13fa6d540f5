"""KernelPlan declaration, parameter validation and version discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench.errors import UsageError
from kbench.plan.base import Launch, Stage
from kbench.plan.discovery import find_package, load_version, packages, with_version

USER = Path(__file__).parent / "data" / "user_kernels"


def test_shipped_packages_and_versions() -> None:
    found = packages()
    assert {"vector_add", "matmul"} <= set(found)
    assert found["vector_add"].versions() == ["base", "v2", "gluon"]
    assert found["matmul"].versions() == ["base", "v2", "torch_mm"]
    assert found["matmul"].baseline() == "torch_mm" and found["vector_add"].baseline() == "base"
    assert found["fork_join"].versions() == ["base", "serial"] and found["fork_join"].baseline() == "serial"


def test_default_version_is_base_and_identity_comes_from_the_module() -> None:
    plan = load_version("matmul").from_values({})
    assert (plan.package, plan.version) == ("matmul", "base")
    assert with_version(plan, "v2").version == "v2"
    assert with_version(plan, "torch_mm").values() == plan.values()


def test_values_keep_declared_order_with_dtype_last_and_slug_is_stable() -> None:
    plan = load_version("matmul").from_values({"k": "512", "m": 64, "dtype": "float16"})
    assert list(plan.values()) == ["m", "n", "k", "dtype"]
    assert plan.values() == {"m": 64, "n": 4096, "k": 512, "dtype": "float16"}
    assert plan.slug() == "m64_n4096_k512_float16"


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"n": "abc"}, "bad parameter --n=abc: Input should be a valid integer"),
        ({"n": "0"}, "bad parameter --n=0: Input should be greater than or equal to 1"),
        ({"dtype": "int3"}, "bad parameter --dtype=int3"),
        ({"b": "32"}, "unknown parameter --b for vector_add base; valid: --n=67108864, --dtype=float32"),
    ],
)
def test_bad_parameters_are_one_line_usage_errors(values: dict[str, str], fragment: str) -> None:
    with pytest.raises(UsageError) as e:
        load_version("vector_add").from_values(values)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_param_info_for_listing() -> None:
    info = {p.name: p for p in load_version("vector_add").params()}
    assert info["n"].ge == 1 and info["n"].le == 1 << 31 and info["n"].default == 1 << 26
    assert info["dtype"].choices == ("float32", "float16", "bfloat16")
    assert list(info) == ["n", "dtype"]


def test_stage_names_cannot_nest_nvtx_ranges() -> None:
    with pytest.raises(ValueError, match="no '/'"):
        Stage("a/b", flops=1, dram_bytes=1, precision="fp32", build=lambda ws, c: None)  # type: ignore[arg-type,return-value]


def test_unknown_package_and_version() -> None:
    with pytest.raises(UsageError, match=r"unknown kernel package 'nope'; available: .*matmul, mla_decode, vector_add"):
        find_package("nope")
    with pytest.raises(UsageError, match="unknown version 'v9' of vector_add; versions: base, v2"):
        load_version("vector_add", "v9")


def test_user_packages_from_kernel_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "broken" not in packages()
    found = packages([str(USER)])
    assert found["broken"].origin == str(USER)
    monkeypatch.setenv("KBENCH_KERNEL_PATH", str(USER))
    cls = load_version("broken")
    assert cls.package_name() == "broken" and cls.version_name() == "base"


def test_kernel_path_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not a folder"):
        packages([str(tmp_path / "missing")])
    clash = tmp_path / "vector_add"
    clash.mkdir()
    (clash / "__init__.py").write_text("")
    with pytest.raises(UsageError, match="exists both in kbench and"):
        packages([str(tmp_path)])


def test_version_module_without_plan_is_rejected(tmp_path: Path) -> None:
    pkg = tmp_path / "noplan"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("X = 1\n")
    with pytest.raises(UsageError, match="must export PLAN"):
        load_version("noplan", extra_paths=[str(tmp_path)])


def test_analytic_models() -> None:
    (mm,) = load_version("matmul").from_values({"m": 128, "n": 256, "k": 64}).stages()
    assert mm.flops == 2 * 128 * 256 * 64 and mm.dram_bytes == 2 * (128 * 64 + 64 * 256 + 128 * 256)
    assert mm.precision == "bf16"
    (add,) = load_version("vector_add").from_values({"n": 1000, "dtype": "float16"}).stages()
    assert add.flops == 1000 and add.dram_bytes == 3 * 1000 * 2 and add.precision == "fp32"


def _user_package(root: Path, name: str, files: dict[str, str]) -> Path:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(files.pop("__init__", ""))
    for module, text in files.items():
        (pkg / f"{module}.py").write_text(text)
    return root


PLAN_SRC = '''
from typing import Any, Literal
from kbench.plan.base import KernelPlan, Launch, Stage, param

class P(KernelPlan):
    """A test plan."""
    n: int = param(8, help="n", ge=1)
    tag: str = param("a", help="a free-text tag")
    dtype: Literal[{dtypes}] = param({default!r}, help="dtype")
    def stages(self) -> list[Stage]:
        return [Stage(name, 1.0, 1.0, "fp32", lambda ws, c: Launch(lambda: None)) for name in {names}]
    def setup(self, device: str, seed: int) -> Any: return None
    def output(self, ws: Any) -> Any: return None
    def reference(self, ws: Any) -> Any: return None

PLAN = P
'''


def plan_src(names: str = '["s"]', dtypes: str = '"float32"', default: str = "float32") -> str:
    return PLAN_SRC.format(names=names, dtypes=dtypes, default=default)


def test_duplicate_or_missing_stages_are_refused(tmp_path: Path) -> None:
    root = _user_package(tmp_path, "dup", {"base": plan_src('["a", "a"]'), "v2": plan_src("[]")})
    with pytest.raises(UsageError, match="repeats stage name"):
        load_version("dup", "base", [str(root)]).from_values({}).checked_stages()
    with pytest.raises(UsageError, match="declares no stage"):
        load_version("dup", "v2", [str(root)]).from_values({}).checked_stages()


def test_slug_is_filesystem_safe(tmp_path: Path) -> None:
    root = _user_package(tmp_path, "tags", {"base": plan_src()})
    plan = load_version("tags", None, [str(root)]).from_values({"tag": "a/../b c"})
    assert "/" not in plan.slug() and ".." not in plan.slug() and plan.slug().startswith("n8_taga_")


def test_a_dtype_without_tolerance_is_refused(tmp_path: Path) -> None:
    root = _user_package(tmp_path, "f64", {"base": plan_src(dtypes='"float32", "int4"')})
    with pytest.raises(UsageError, match="allows dtype int4 but declares no tolerance"):
        load_version("f64", None, [str(root)]).from_values({"dtype": "int4"})


def test_plan_must_be_defined_in_its_version_module(tmp_path: Path) -> None:
    root = _user_package(tmp_path, "alias", {"base": plan_src(), "v2": "from .base import P\nPLAN = P\n"})
    with pytest.raises(UsageError, match=r"PLAN must be a class defined in v2\.py"):
        load_version("alias", "v2", [str(root)])


def test_a_broken_user_package_is_one_line_and_not_left_half_imported(tmp_path: Path) -> None:
    root = _user_package(tmp_path, "bad", {"__init__": "raise RuntimeError('oops\\nmore')\n", "base": plan_src()})
    assert "bad" in packages([str(root)])  # listing folders imports nothing
    for _ in range(2):  # the second attempt fails the same way: nothing half-initialised was kept
        with pytest.raises(UsageError, match=r"cannot import kernel package .*__init__.py: RuntimeError: oops$"):
            load_version("bad", None, [str(root)])
    root2 = _user_package(tmp_path / "other", "syntax", {"base": "def broken(:\n"})
    with pytest.raises(UsageError, match="cannot import syntax base: SyntaxError"):
        load_version("syntax", None, [str(root2)])


def test_the_same_folder_twice_is_not_a_clash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBENCH_KERNEL_PATH", str(USER))
    assert "broken" in packages([str(USER)])


def test_concurrent_plans_declare_streams_and_dependencies() -> None:
    base = load_version("fork_join").from_values({})
    assert base.concurrent() and not with_version(base, "serial").concurrent()
    assert not load_version("matmul").from_values({}).concurrent()
    streams = {s.name: (s.stream, tuple(s.after)) for s in base.checked_stages()}
    assert streams == {"mm": (1, ()), "rowsum": (2, ()), "combine": (0, ("mm", "rowsum"))}
    with pytest.raises(ValueError, match="stream must be 0"):
        Stage("s", 1.0, 1.0, "fp32", lambda ws, c: Launch(lambda: None), stream=-1)


def test_a_dependency_on_a_later_or_unknown_stage_is_refused(tmp_path: Path) -> None:
    src = plan_src('["a", "b"]').replace(
        'return [Stage(name, 1.0, 1.0, "fp32", lambda ws, c: Launch(lambda: None)) for name in ["a", "b"]]',
        'return [Stage("a", 1.0, 1.0, "fp32", lambda ws, c: Launch(lambda: None), after=("b",)), '
        'Stage("b", 1.0, 1.0, "fp32", lambda ws, c: Launch(lambda: None), stream=1)]',
    )
    root = _user_package(tmp_path, "deps", {"base": src})
    with pytest.raises(UsageError, match="stage a runs after b, which is not a stage declared before it"):
        load_version("deps", None, [str(root)]).from_values({}).checked_stages()


def test_a_choice_of_numbers_is_given_as_text_on_a_command_line() -> None:
    """`--d=64` reaches from_values as the text "64": a Literal[64] parameter takes the choice it names (issue 51's
    scores plan declares one; the text alone failed pydantic's literal check)."""
    scores = load_version("scores", "before", [str(Path(__file__).parent / "data" / "validation")])
    assert scores.from_values({"d": "64"}).d == 64  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match=r"bad parameter --d=96"):
        scores.from_values({"d": "96"})
