"""compiled/<stage>/<kernel>.sass: nvdisasm's listing of a cubin written beside its PTX where nvdisasm is found, so
that event mode's static per-line mix counts the machine code (the real listing: tests/data/issue42_h100/sass, made
by nvdisasm -g -c on the H100's CUDA 13.0 of divmod modulo's cubin)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbench.analysis.lines import compiled
from kbench.capture import sass
from tests.conftest import DATA

# divmod compare's kernel (the fixed twin: its wrap is a compare and a select on line 24)
REAL = DATA / "issue42_h100/sass/divmod-window_kernel.sass"
PTX = DATA / "issue42_h100/compiled/divmod-compare/window_kernel.ptx"


def fake_nvdisasm(folder: Path, body: str) -> Path:
    tool = folder / "nvdisasm"
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)
    return tool


def test_the_listing_lands_beside_the_ptx_and_the_static_mix_reads_it(tmp_path: Path) -> None:
    stage = tmp_path / "compiled/window"
    stage.mkdir(parents=True)
    shutil.copy(PTX, stage / "window_kernel.ptx")
    (stage / "window_kernel.cubin").write_bytes(b"\x7fELF")
    tool = fake_nvdisasm(tmp_path, f'[ "$1 $2" = "-g -c" ] && cat "{REAL}"')
    written = sass.disassemble(stage / "window_kernel.cubin", tool)
    assert written == stage / "window_kernel.sass" and written.read_text() == REAL.read_text()
    (model,) = compiled(stage)
    # counted from SASS, not PTX: the loop's hottest line is the load and add (LDG, FADD, the address LEAs), the wrap's
    # line the compare and select ptxas emitted for tl.where (ISETP, SEL), no division anywhere
    by_line = {x.line: x for x in model.lines}
    assert max(model.lines, key=lambda x: x.looped).line == 25
    assert {"LDG", "FADD", "LEA"} <= set(by_line[25].opcodes) and {"ISETP", "SEL"} <= set(by_line[24].opcodes)
    assert not any(op.startswith("IMAD.HI") for x in model.lines for op in x.opcodes)


def test_without_a_working_nvdisasm_the_ptx_stands_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF")
    assert sass.disassemble(cubin, None) is None
    assert sass.disassemble(cubin, fake_nvdisasm(tmp_path, "echo broken >&2; exit 3")) is None
    assert sass.disassemble(cubin, fake_nvdisasm(tmp_path, "echo no line info")) is None  # not built with -lineinfo
    assert not (tmp_path / "k.sass").exists()
    monkeypatch.setenv("KBENCH_NVDISASM", str(tmp_path / "missing"))
    assert sass.nvdisasm() is None  # said in the log, the run goes on


def test_the_same_machine_code_is_listed_once_per_process(tmp_path: Path) -> None:
    """The resident's edit loop profiles the same kernel again: its listing is written without running nvdisasm
    again; other machine code runs it."""
    calls = tmp_path / "calls"
    tool = fake_nvdisasm(tmp_path, f'echo x >> "{calls}"; cat "{REAL}"')
    first, second = tmp_path / "a", tmp_path / "b"
    for d in (first, second):
        d.mkdir()
        (d / "k.cubin").write_bytes(b"\x7fELF same " + tmp_path.name.encode())
    assert sass.disassemble(first / "k.cubin", tool) == first / "k.sass"
    assert sass.disassemble(second / "k.cubin", tool) == second / "k.sass"
    assert (second / "k.sass").read_text() == REAL.read_text() and calls.read_text().count("x") == 1
    (second / "k.cubin").write_bytes(b"\x7fELF other " + tmp_path.name.encode())
    assert sass.disassemble(second / "k.cubin", tool) is not None and calls.read_text().count("x") == 2
