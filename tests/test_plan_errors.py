"""A plan that breaks its own contract (not its kernel) gets one clear line and exit 2 (a usage error), never the
internal-error exit 70: tests/data/bad_kernels/faulty, one broken part per version, checked under the CPU
interpreter through `kbench check` and `--predict`."""

from __future__ import annotations

import pytest

from tests.conftest import DATA

FAULTY = str(DATA / "bad_kernels")


@pytest.mark.parametrize(
    ("version", "command", "fragment"),
    [
        ("no_flops", "check", "faulty no_flops: stage double declares flops=None; it must be a finite number >= 0"),
        ("no_flops", "profile", "faulty no_flops: stage double declares flops=None"),
        ("raising_stages", "check", "faulty raising_stages: stages() raised ZeroDivisionError: division by zero"),
        ("bad_reference", "check", "faulty bad_reference: reference() returned float, not a tensor"),
        ("raising_build", "check", "faulty raising_build: stage double: build() raised RuntimeError: no such kernel"),
        ("no_launch", "check", "faulty no_launch: stage double: build() returned function, not a Launch"),
    ],
)
def test_a_broken_plan_is_a_usage_error(cli, version: str, command: str, fragment: str) -> None:
    extra = ["--predict", "--device", "H100_SXM"] if command == "profile" else []
    r = cli(command, "faulty", version, "--kernel-path", FAULTY, *extra)
    lines = [line for line in r.stderr.splitlines() if line.startswith("kbench: error:")]
    assert r.returncode == 2 and len(lines) == 1 and fragment in lines[0], r.stderr


def test_the_correct_version_passes(cli) -> None:
    r = cli("check", "faulty", "base", "--kernel-path", FAULTY)
    assert r.returncode == 0 and "all 1 configuration(s) pass" in r.stdout, r.stderr


def test_a_bf16_only_plan_says_why_it_cannot_be_checked_on_cpu(cli) -> None:
    r = cli("check", "faulty", "bf16_only", "--kernel-path", FAULTY)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == (
        "kbench: error: faulty bf16_only allows only dtype bfloat16, and Triton's CPU interpreter has no bfloat16 "
        "arithmetic, so it cannot be checked here: allow float16 or float32 in the plan's dtype for CPU checks, or "
        "run `kbench check` on a GPU machine"
    )


def test_a_bf16_plan_that_allows_float32_is_checked_in_float32_and_says_so(cli) -> None:
    r = cli("check", "faulty", "bf16_or_fp32", "--kernel-path", FAULTY)
    assert r.returncode == 0, r.stderr
    assert (
        "bf16 plan checked in float32: the interpreter has no bfloat16 arithmetic (not a bf16 pass)"
        in r.stdout + r.stderr
    )


def test_a_bad_choice_names_what_is_expected_in_one_plain_line(cli) -> None:
    r = cli("check", "faulty", "bf16_only", "--dtype=float16", "--kernel-path", FAULTY)
    line = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "  " not in line, line
    assert line.endswith("; expected --dtype (choice: bfloat16; default bfloat16): element type"), line
