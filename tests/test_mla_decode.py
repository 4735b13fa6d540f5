"""The MLA decode family on CPU: every version passes the correctness check under Triton's interpreter (fp16, the
bf16 plans' stand-in, and fp32), the FLOP/byte model gives the intensities the issue states, and parameters a
version cannot run are refused in one line before any work."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kbench.plan.discovery import load_version
from tests.conftest import Ran

VERSIONS = ["base", "v1", "v2", "v3", "v4", "v5", "v6", "v6_branch"]


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_passes_the_check_under_the_interpreter(cli: Callable[..., Ran], version: str) -> None:
    done = cli("check", "mla_decode", version)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "float16" in done.stdout and "not a bf16 pass" in done.stdout  # said, not passed off as bf16
    configs = [line for line in done.stdout.splitlines() if ": PASS: " in line]
    assert configs and len(configs) == len([line for line in done.stdout.splitlines() if line.startswith("  ")])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("version", "extra"),
    [
        ("v2", ["--s=1", "--h=16"]),
        ("v3", ["--s=2", "--t=300"]),
        ("v4", []),
        ("v5", ["--s=16", "--h=16"]),
        ("v6", ["--b=99"]),  # 99 sequences of one row block fill 75% of 132 SMs: v5's fused path
        ("v6_branch", ["--b=99"]),  # the fused path with the softmax step under its runtime branch
        ("v7", ["--b=99"]),  # fused, float32: v5's Triton kernel (the Gluon kernel takes 16-bit types)
    ],
)
def test_fp32_and_other_shapes_pass(cli: Callable[..., Ran], version: str, extra: list[str]) -> None:
    done = cli("check", "mla_decode", version, "--dtype=float32", *extra)
    assert done.returncode == 0, done.stderr + done.stdout


@pytest.mark.parametrize("version", ["v7", "v7_fa3"])
def test_v7s_split_kv_path_passes_under_the_interpreter(cli: Callable[..., Ran], version: str) -> None:
    """Where the fused grid would not fill the GPU, v7 runs v6's split-KV kernels (Triton: checked here); its Gluon
    kernel is compiled, not run, at the check's default sizes (tests/test_gluon.py)."""
    done = cli("check", "mla_decode", version, "--b=2")
    assert done.returncode == 0, done.stderr + done.stdout
    assert ": PASS: " in done.stdout and "COMPILED" not in done.stdout


def test_the_cost_model_gives_the_stated_intensities() -> None:
    plan = load_version("mla_decode", "v2").from_values({"b": "32", "s": "16", "t": "4096", "h": "16"})
    [stage] = plan.stages()
    assert stage.flops == 2 * 32 * 16 * 16 * 4096 * (512 + 64) + 2 * 32 * 16 * 16 * 4096 * 512
    assert stage.flops / stage.dram_bytes == pytest.approx(432, rel=0.01)  # compute-bound on an H100
    decode = load_version("mla_decode", "v2").from_values({"b": "32", "s": "1", "t": "8192", "h": "16"})
    [one] = decode.stages()
    assert one.flops / one.dram_bytes == pytest.approx(30, rel=0.05)  # memory-bound
    # the unfused version moves the scores and probabilities through DRAM: same FLOPs, more bytes
    v1 = load_version("mla_decode", "v1").from_values({"b": "32", "s": "16", "t": "4096", "h": "16"})
    assert sum(s.dram_bytes for s in v1.stages()) > 2 * stage.dram_bytes


@pytest.mark.parametrize(
    ("version", "args", "fragment"),
    [
        ("base", ["--s=20", "--t=10"], "s=20 > t=10: the s new tokens are among the t cached ones"),
        ("v1", ["--d=48"], "d=48, p=64: this version's kernels need both to be powers of two"),
        ("v3", ["--p=24"], "d=512, p=24: this version's kernels need both to be powers of two"),
    ],
)
def test_a_combination_a_version_cannot_run_is_refused(
    cli: Callable[..., Ran], version: str, args: list[str], fragment: str
) -> None:
    done = cli("check", "mla_decode", version, *args)
    assert done.returncode == 2 and f"mla_decode {version} cannot run these parameters: {fragment}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_base_version_takes_any_width() -> None:
    plan = load_version("mla_decode", "base").from_values({"d": "48", "p": "24"})
    assert plan.stages()[0].precision == "bf16"


def test_split_kv_puts_the_split_that_fills_the_gpu_first() -> None:
    # plain decode with few sequences: b x row blocks programs leave most SMs idle, so more splits come first
    few = load_version("mla_decode", "v3").from_values({"b": "4", "s": "1", "t": "8192", "h": "16"})
    many = load_version("mla_decode", "v3").from_values({"b": "64", "s": "16", "t": "8192", "h": "16"})
    assert few.tuning()[0]["SPLITS"] > many.tuning()[0]["SPLITS"]  # type: ignore[attr-defined]
    # 4 programs want ~66 splits: 64 (each split 128 cache rows) and its neighbour 32, for each 16-row tile only
    assert [(c["BLOCK_M"], c["SPLITS"]) for c in few.tuning()] == [(16, 64), (16, 32), (16, 64), (16, 32)]  # type: ignore[attr-defined]
    assert {c["BLOCK_M"] for c in many.tuning()} == {16, 64}  # type: ignore[attr-defined]  # 256 rows: wider tiles too


def test_v6_runs_the_fused_kernel_where_its_grid_fills_the_gpu() -> None:
    # the compute-bound point: 32 x 4 row blocks of 64 = 128 CTAs on 132 SMs, one kernel; plain decode (32 CTAs),
    # the s=4 point (32) and 128 heads at s=1 (64): split-KV and a combine
    def stages(**point: str) -> list[str]:
        return [s.name for s in load_version("mla_decode", "v6").from_values(point).stages()]

    assert stages(b="32", s="16", t="4096") == ["attention"]
    assert stages(b="32", s="1", t="8192") == stages(b="32", s="4", t="4096") == ["partial", "combine"]
    assert stages(b="32", s="1", t="4096", h="128") == ["partial", "combine"]
