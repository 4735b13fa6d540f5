"""The command line: listing, help, checks under the interpreter, and one clear line for every bad input."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import HAS_CUDA, Ran

USER = Path(__file__).parent / "data" / "user_kernels"


@pytest.fixture
def run(cli: Callable[..., Ran], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Ran]:
    """`python -m kbench.kernel ...` (or module="kbench") in this process, in ``cwd`` when given."""
    monkeypatch.delenv("KBENCH_KERNEL_PATH", raising=False)

    def go(*args: str, module: str = "kbench.kernel", cwd: Path | None = None) -> Ran:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        return cli(*args, module=module)

    return go


def one_error_line(p: Ran | subprocess.CompletedProcess[str]) -> str:
    errors = [line for line in p.stderr.splitlines() if line.startswith("kbench: error: ")]
    assert len(errors) == 1, p.stderr
    assert "Traceback" not in p.stderr
    return errors[0]


def test_list_shows_both_plans_versions_and_parameters(run) -> None:
    p = run("--list")
    assert p.returncode == 0, p.stderr
    for text in [
        "vector_add:",
        "matmul:",
        "  v2:",
        "  torch_mm  (baseline):",
        "--n=67108864",
        "--m=4096",
        "--dtype=bfloat16  choice  one of bfloat16|float16",
    ]:
        assert text in p.stdout
    assert run("list", module="kbench").stdout == p.stdout


def test_help_explains_usage_modes_and_parameters(run) -> None:
    p = run("--help")
    assert p.returncode == 0
    for text in [
        "<kernel_package> [<version>]",
        "--prof_type",
        "annotation",
        "--name=value",
        "--predict",
        "--bench-runs",
        "--no-check",
        "--kernel-path",
        "--out",
    ]:
        assert text in p.stdout, text
    top = run("--help", module="kbench")
    assert all(cmd in top.stdout for cmd in ("profile", "check", "list"))


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["nope"], 2, "unknown kernel package 'nope'; available: fork_join, matmul, mla_decode, vector_add"),
        (["vector_add", "v7"], 2, "unknown version 'v7' of vector_add; versions: base, v2"),
        (["vector_add", "--n=abc"], 2, "bad parameter --n=abc: Input should be a valid integer"),
        (["vector_add", "--b=32"], 2, "unknown parameter --b for vector_add base; valid: --n=67108864"),
        (["vector_add", "--n", "5"], 2, "plan parameters are written --name=value"),
        (["vector_add", "--bench-runs=x"], 2, "Invalid value for '--bench-runs'"),
        (["vector_add", "--prof_type=perf"], 2, "unknown --prof_type=perf; choose one of annotation, event"),
        (["matmul", "--timeline-backend=torch"], 2, "--timeline-backend applies to --prof_type=nsys only"),
        (["matmul", "--prof_type=nsys", "--timeline-backend=perfetto"], 2, "--timeline-backend=perfetto: choose auto"),
        (["matmul", "--prof_type=nsys", "--cuda-graph"], 2, "--cuda-graph applies to --prof_type=event only"),
        (["matmul", "--prof_type=event", "--pc-sampling"], 2, "--pc-sampling applies to --prof_type=proton only"),
        ([], 2, "name a kernel package, e.g. `vector_add`"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(run, args: list[str], code: int, fragment: str) -> None:
    p = run(*args)
    assert p.returncode == code and fragment in one_error_line(p)


@pytest.mark.skipif(HAS_CUDA, reason="checks the message shown without a GPU")
@pytest.mark.parametrize("mode", ["event", "annotation", "ncu", "nsys", None])
def test_profiling_without_a_gpu_says_so(run, tmp_path: Path, mode: str | None) -> None:
    p = run("vector_add", *([f"--prof_type={mode}"] if mode else []), cwd=tmp_path)
    assert p.returncode == 3
    line = one_error_line(p)
    assert f"--prof_type={mode or 'event'} needs a CUDA GPU" in line
    assert "`kbench check <kernel>`" in line and "`--prof_type=access`" in line  # what runs on a CPU instead
    assert not (tmp_path / "out").exists()  # nothing half-made


@pytest.mark.skipif(HAS_CUDA, reason="the fall-back without a GPU")
def test_predict_without_a_gpu_falls_back_to_the_documented_device_and_says_so(run) -> None:
    p = run("matmul", "--predict")
    assert p.returncode == 0, p.stderr
    first = p.stdout.splitlines()[0]
    assert "on NVIDIA H100 SXM5 80GB (H100_SXM, datasheet peaks; " in first
    assert "no GPU here: the default --device" in first
    helped = " ".join(run("--help").stdout.split())
    assert "device to predict for, a key of conf/devices.json (default: this machine's GPU, else H100_SXM)" in helped


@pytest.mark.slow
@pytest.mark.skipif(HAS_CUDA, reason="CPU interpreter path")
@pytest.mark.parametrize("package", ["vector_add", "matmul", "fork_join"])
def test_kbench_check_passes_under_the_interpreter(run, package: str) -> None:
    p = run("check", package, module="kbench")
    assert p.returncode == 0, p.stderr
    assert "on cpu (Triton interpreter, TRITON_INTERPRET=1)" in p.stdout
    # vector_add's gluon version is compiled for sm_90, not run: the interpreter cannot run Gluon
    gluon = "pass or compile: 1 with Gluon kernels compiled for sm_90 and not run (numerics need a GPU)"
    assert p.stdout.rstrip().endswith(gluon if package == "vector_add" else "pass")
    if package == "matmul":
        assert "bf16 plan checked in float16" in p.stdout


def test_kbench_check_reports_a_wrong_kernel(run) -> None:
    p = run(
        "check", "wrong", "base", "--kernel-path", str(Path(__file__).parent / "data" / "bad_kernels"), module="kbench"
    )
    assert p.returncode == 5 and "1 of 1 configuration(s) failed the check" in one_error_line(p)
    assert "FAIL: relative L2 error" in p.stdout


def test_predict_on_a_named_device_runs_nothing(run) -> None:
    p = run("matmul", "--predict", "--device", "H100_SXM")
    assert p.returncode == 0, p.stderr
    mm = next(line for line in p.stdout.splitlines() if line.startswith("mm "))
    # 2*4096^3 FLOP at 989.4 TFLOP/s: 138.91 us, compute-limited; ridge 295.3 FLOP/B
    assert mm.split()[-2:] == ["138.91", "compute"] and "295.3" in mm
    p = run("vector_add", "--predict", "--device", "H200_SXM", "--n=1048576")
    add = next(line for line in p.stdout.splitlines() if line.startswith("add "))
    assert add.split()[-2:] == [f"{12 * 2**20 / 4.8e12 * 1e6:.2f}", "memory"]


@pytest.mark.slow
@pytest.mark.skipif(HAS_CUDA, reason="no-GPU path")
def test_user_kernel_path_from_environment_is_listed(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBENCH_KERNEL_PATH", str(USER))
    p = run("list", module="kbench")
    assert p.returncode == 0 and "broken: A user kernel package whose kernel raises" in p.stdout


@pytest.mark.parametrize("module", ["kbench", "kbench.kernel"])
def test_the_module_entry_points_run(module: str) -> None:
    # the one place a real interpreter start is the point: `python -m kbench` and `python -m kbench.kernel`
    p = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "kbench" in p.stdout and not p.stderr


def test_device_without_predict_is_refused(run) -> None:
    p = run("vector_add", "--device", "H100_SXM", "--prof_type=event")
    assert p.returncode == 2 and "--device names the device for --predict" in one_error_line(p)


def test_a_plan_parameter_named_like_an_option_is_refused(run, tmp_path: Path) -> None:
    pkg = tmp_path / "clash"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    src = (
        (USER / "broken" / "base.py")
        .read_text()
        .replace('n: int = param(1024, help="elements", ge=1)', 'out: int = param(1024, help="elements", ge=1)')
    )
    (pkg / "base.py").write_text(src)
    p = run("clash", "--kernel-path", str(tmp_path), "--prof_type=event")
    assert p.returncode == 2 and "declares parameter(s) out, which kbench's own options use" in one_error_line(p)


def test_a_package_and_a_version_help_show_their_parameters_and_docstring(cli) -> None:
    mla = cli("mla_decode", "--help", module="kbench.kernel")
    mm = cli("matmul", "--help", module="kbench.kernel")
    v3 = cli("mla_decode", "v3", "--help", module="kbench.kernel")
    assert mla.returncode == mm.returncode == v3.returncode == 0 and mla.stdout != mm.stdout
    for name in ("b", "s", "t", "h", "d", "p"):
        assert f"    --{name} (int, " in mla.stdout and f"--{name} (int" not in mm.stdout
    assert "--dtype (choice: bfloat16|float16|float32; default bfloat16): element type of q, kv and out" in mla.stdout
    assert "mla_decode base: " in mla.stdout and "versions: base, v1, v2, v3" in mla.stdout
    assert "mla_decode v3: Split-KV flash-decoding" in v3.stdout
    bad = cli("nosuch", "--help", module="kbench.kernel")
    assert bad.returncode == 0 and "(unknown kernel package 'nosuch'; available: " in bad.stdout


def test_list_takes_a_package(cli) -> None:
    one = cli("list", "mla_decode")
    assert one.returncode == 0 and one.stdout.startswith("mla_decode: ") and "\nvector_add:" not in one.stdout
    flag = cli("vector_add", "--list", module="kbench.kernel")
    assert flag.returncode == 0 and flag.stdout.startswith("vector_add: ") and "mla_decode" not in flag.stdout
    bad = cli("list", "nosuch")
    assert bad.returncode == 2 and "unknown kernel package 'nosuch'" in bad.stderr


@pytest.mark.skipif(HAS_CUDA, reason="CPU interpreter path")
def test_check_without_a_version_checks_every_version_and_skips_those_that_refuse(cli) -> None:
    every = cli("check", "vector_add")
    said = "configuration(s) of 3 version(s) pass or compile: 1 with Gluon kernels compiled for sm_90 and not run"
    assert every.returncode == 0 and said in every.stdout.splitlines()[-1]
    assert "checking vector_add base " in every.stdout and "checking vector_add v2 " in every.stdout
    d48 = cli("check", "mla_decode", "--d=48", "--t=70")
    assert d48.returncode == 0, d48.stderr
    assert "skipping mla_decode v2: mla_decode v2 cannot run these parameters" in d48.stdout
    from kbench.plan.discovery import find_package

    others = len(find_package("mla_decode").versions()) - 1  # every version but the baseline refuses d=48
    assert d48.stdout.rstrip().endswith(f"of 1 version(s) ({others} skipped) pass")


ACCESS_RUN = Path(__file__).parents[1] / "docs" / "examples" / "access-h100" / "access-transpose-naive"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["matmul", "--prof_type=access", "--baseline", "nope"], "--baseline nope has no readable result.json"),
        (["matmul", "--prof_type=access", "--baseline", str(ACCESS_RUN)], "a baseline must have the same kernel"),
        (["mcp", "--kernel-path", "nope"], "kernel path nope is not a folder"),
        (["runs", "--out", "nope"], "--out nope is not a folder"),
        (["check", "vector_add", "--access", "--access-pictures", "/proc/nope/x"], "--access-pictures /proc/nope/x"),
    ],
)
def test_a_missing_or_wrong_input_is_bad_input_exit_2(run, tmp_path: Path, args: list[str], fragment: str) -> None:
    """The README's exit codes: bad input is 2 (never 1, as another kbench error, nor 70, as a bug); nothing made."""
    module = "kbench.kernel" if args[0] == "matmul" else "kbench"
    p = run(*args, module=module, cwd=tmp_path)
    assert (p.returncode, fragment in one_error_line(p)) == (2, True)
    assert not (tmp_path / "out").exists()


def test_kbench_runs_in_a_fresh_folder_says_there_are_none_yet(run, tmp_path: Path) -> None:
    p = run("runs", module="kbench", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr.strip() == "no runs under out/profiles"


def test_the_default_mode_is_event_everywhere(run) -> None:
    """The CLI's profile, kbench sweep, the API's sweep and the MCP profile tool default to one mode: event, the fast
    first look SKILL.md's decision tree starts with."""
    import inspect

    import anyio
    from mcp import Client

    from kbench import api
    from kbench.cli import app, kernel
    from kbench.cli.mcp_server import build
    from kbench.modes import registry

    schema: dict[str, object] = {}

    async def main() -> None:
        async with Client(build()) as c:
            tool = next(t for t in (await c.list_tools()).tools if t.name == "profile")
            schema.update(tool.input_schema["properties"]["mode"])

    anyio.run(main)
    defaults = {
        "profile": inspect.signature(kernel.profile).parameters["prof_type"].default.default,
        "sweep": inspect.signature(app.sweep_cmd).parameters["prof_type"].default.default,
        "api.sweep": inspect.signature(api.sweep).parameters["mode"].default,
        "mcp": schema["default"],
    }
    assert set(defaults.values()) == {registry.DEFAULT} == {"event"}, defaults
    assert "event is the default" in " ".join(run("--help").stdout.split())
