"""Gluon kernels as plans on a machine without a GPU (kbench.capture.gluon): `kbench check` compiles them for sm_90
instead of running them under Triton's interpreter (which cannot), says so in one line and leaves their numerics to
a GPU; a kernel that no longer compiles fails the check; access mode says it cannot trace them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kbench.capture import gluon
from tests.conftest import Ran

pytest.importorskip("triton.experimental.gluon", reason="this Triton has no Gluon")


def test_check_on_a_cpu_compiles_a_gluon_kernel_for_sm90_and_says_its_numerics_need_a_gpu(
    cli: Callable[..., Ran],
) -> None:
    done = cli("check", "vector_add", "gluon")
    assert done.returncode == 0, done.stderr + done.stdout
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("  add ")]
    assert line.startswith(
        "  add {'BLOCK': 1024, 'num_warps': 4}: COMPILED, NOT RUN: gluon_add_kernel compiled for sm_90a ("
    )
    assert (
        "cannot run Gluon kernels, so their numerics are not checked here: run `kbench check vector_add gluon` on a "
        in line
    )
    assert done.stdout.strip().endswith("1 with Gluon kernels compiled for sm_90 and not run (numerics need a GPU)")


COMPILE_V7 = """
from kbench.capture.gluon import compile_only
from kbench.plan.discovery import load_version
for version in ("v7", "v7_fa3", "v8"):
    plan = load_version("mla_decode", version).from_values({"b": 100, "s": 3, "t": 70, "h": 4, "d": 64, "p": 32,
                                                            "dtype": "float16"})
    (stage,) = plan.stages()
    with compile_only() as made:
        kernel = stage.build(plan.setup("cpu", 0), stage.tuning[0]).fn()
    print(made[0].words())
from kbench.analysis.ttgir import partitions
print(partitions(kernel.asm["ttgir"]))  # v8's, as this Triton writes its TTGIR
"""


@pytest.mark.slow
def test_mla_decode_v7s_gluon_kernel_compiles_with_its_reductions_under_the_interpreter(tmp_path: Path) -> None:
    """v7 reduces with gl.max and gl.sum, Triton library functions that are interpreter functions where
    triton.language was first imported under TRITON_INTERPRET=1 (as here, in a fresh process): the compile swaps in
    compiler ones (before: "Unsupported function referenced: InterpretedFunction" whenever Triton's cache did not
    hold the kernel already: an empty cache here)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", COMPILE_V7], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    *lines, parts = done.stdout.splitlines()
    assert parts == "{'default_warps': 4, 'workers': [{'warps': 4, 'registers': 240}, {'warps': 1, 'registers': 24}]}"
    assert len(lines) == 3 and all(x.startswith("mla_v7_kernel compiled for sm_90a (") for x in lines[:2]), lines
    # d=64, p=32: v7 2 x (4 + 2) m64n32 Q.K^T steps and 2 x 4 P.V steps; v8 2 x (2 + 1) and 2 x 4 per warpgroup
    assert all("20 wgmma" in x for x in lines[:2]), lines
    assert lines[2].startswith("mla_v8_kernel compiled for sm_90a (") and "14 wgmma" in lines[2], lines


def test_the_interpreters_library_functions_are_put_back_after_a_compile() -> None:
    import triton.language.standard as standard

    from kbench.kernel.vector_add.gluon import VectorAddGluon

    plan = VectorAddGluon(n=3000)
    (stage,) = plan.stages()
    before = dict(vars(standard))
    with gluon.compile_only() as made:
        stage.build(plan.setup("cpu", 0), stage.tuning[0]).fn()
    assert len(made) == 1 and all(vars(standard)[k] is v for k, v in before.items())


CHECK_AFTER_INTERPRETED = """
from kbench.capture.check import check_plan, cpu_values
from kbench.plan.discovery import load_version
for version in ("v6", "v7"):  # v6's interpreted kernels call @jit helpers, then v7's Gluon kernel compiles
    cls = load_version("mla_decode", version)
    values, note = cpu_values(cls, {})
    for r in check_plan(cls.from_values(values), "cpu", note):
        print(version, r.result.passed, bool(r.result.compiled))
"""


@pytest.mark.slow
def test_a_gluon_kernel_compiles_after_interpreted_kernels_in_the_same_process(tmp_path: Path) -> None:
    """Triton's interpreter leaves its language patches behind after a kernel's @jit helper calls: a Gluon kernel
    compiled next in the same process (every version of a package checked at once, an empty Triton cache) failed
    with "'value' object has no attribute 'dtype'"; each check region now puts the language back as it found it."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CHECK_AFTER_INTERPRETED], capture_output=True, text=True, env=env,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "v7 True True" and all(x.startswith("v6 True False") for x in lines[:-1]), lines


BROKEN = """
import dataclasses
from typing import ClassVar
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from kbench.kernel.vector_add.base import VectorAdd

@gluon.jit
def broken_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: gl.constexpr):
    offs = gl.arange(0, BLOCK)  # no layout: Gluon refuses it
    gl.store(c_ptr + offs, gl.load(a_ptr + offs))

class Broken(VectorAdd):
    def _build_add(self, ws, cfg):
        from kbench.plan.base import Launch
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        return Launch(lambda: broken_kernel[grid](ws.a, ws.b, ws.c, self.n, cfg["BLOCK"]), grid)

PLAN = Broken
"""


def test_a_gluon_kernel_that_does_not_compile_fails_the_check_in_one_line(
    cli: Callable[..., Ran], tmp_path: Path
) -> None:
    pkg = tmp_path / "gbroken"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""a Gluon kernel that no longer compiles"""\nBASELINE = "base"\n')
    (pkg / "base.py").write_text(BROKEN)
    done = cli("check", "gbroken", "--kernel-path", str(tmp_path))
    assert done.returncode not in (0, 70), done.stderr + done.stdout
    assert "Traceback" not in done.stderr and "stage add failed" in done.stderr
    assert "COMPILED" not in done.stdout


@pytest.mark.slow
def test_access_mode_says_it_cannot_trace_a_gluon_kernel(cli: Callable[..., Ran], tmp_path: Path) -> None:
    done = cli("vector_add", "gluon", "--n=4096", "--prof_type=access", "--out", str(tmp_path), module="kbench.kernel")
    assert done.returncode == 7, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    said = (
        "kbench: error: access mode cannot trace stage add: its kernel gluon_add_kernel is written in Gluon, which "
        "Triton's CPU interpreter cannot run (gluon_add_kernel compiled for sm_90a"
    )
    assert last.startswith(said)
    assert "profile it on a GPU (--prof_type=event, annotation or ncu)" in last


def test_what_the_ptx_holds_is_counted_as_written() -> None:
    ptx = "\n".join([
        ".version 8.7", ".target sm_90a",
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {...};",
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {...};",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd2, {%r3, %r4}], [%r5];",
        "mbarrier.init.shared::cta.b64 [%r6], 1;", "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r6], %r7;",
    ])  # fmt: skip
    kernel = type("K", (), {"asm": {"ptx": ptx, "cubin": b"\x00" * 100}})()
    made = gluon.Compiled.of("k", kernel)
    assert (made.arch, made.cubin_bytes, made.wgmma, made.tma, made.mbarrier) == ("sm_90a", 100, 2, 1, 2)
    assert made.words() == "k compiled for sm_90a (100 B of cubin; PTX: 2 wgmma, 1 TMA, 2 mbarrier)"
