"""KernelPlan declaration, parameter validation and version discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench.errors import UsageError
from kbench.plan.base import Stage
from kbench.plan.discovery import find_package, load_version, packages

USER = Path(__file__).parent / "data" / "user_kernels"


def test_shipped_packages_and_versions() -> None:
    found = packages()
    assert {"vector_add", "matmul"} <= set(found)
    assert found["vector_add"].versions() == ["base", "v2"]
    assert found["matmul"].versions() == ["base", "v2", "torch_mm"]
    assert found["matmul"].baseline() == "torch_mm" and found["vector_add"].baseline() == "base"


def test_default_version_is_base_and_identity_comes_from_the_module() -> None:
    plan = load_version("matmul").from_values({})
    assert (plan.package, plan.version) == ("matmul", "base")
    assert plan.with_version("v2").version == "v2"
    assert plan.with_version("torch_mm").values() == plan.values()


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
    with pytest.raises(UsageError, match=r"unknown kernel package 'nope'; available: .*matmul, vector_add"):
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
