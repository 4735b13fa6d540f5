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
