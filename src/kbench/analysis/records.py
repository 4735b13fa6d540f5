"""The records a kbench run folder keeps beside its capture, checked as `kbench analyze` reads them back: each
stage's launch record (tiling/<stage>.json: grid, registers, the compiled kernel's instruction mix, its data flow)
and the access run's predictions (predicted.json). A field of the wrong type is a malformed input (exit 4) that
names the file, never a crash deep in the analysis (exit 70). Only the fields the analysis reads are checked."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, NonNegativeFloat, NonNegativeInt, StrictBool, TypeAdapter, ValidationError

from kbench.analysis.access_facts import Predicted
from kbench.analysis.ptx import InstructionMix
from kbench.analysis.ptxas import Serialized
from kbench.analysis.ttgir import AtomicOp, DotOp
from kbench.errors import ConfigError
from kbench.model import Model, first_error


class _Tensor(Model):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    name: str
    bytes: float
    read: StrictBool
    written: StrictBool
    output: StrictBool = False


class _Moved(Model):
    model_config = ConfigDict(allow_inf_nan=False)
    name: str
    bytes: NonNegativeFloat


class _LaunchFlow(Model):
    kernel: str
    reads: list[_Moved]
    writes: list[_Moved]


class _Dataflow(Model):
    model_config = ConfigDict(extra="allow")
    kernels: NonNegativeInt | None = None
    tensors: list[_Tensor]
    launches: list[_LaunchFlow] | None = None  # one by one, in launch order (kbench.capture.dataflow)


class _Compiled(Model):
    """What the analysis reads of one compiled kernel's facts (others pass unread)."""

    model_config = ConfigDict(extra="allow")
    grid: list[NonNegativeInt] | None = None
    registers: NonNegativeInt | None = None
    num_warps: NonNegativeInt | None = None
    num_stages: NonNegativeInt | None = None
    spills: NonNegativeInt | None = None
    shared_bytes: NonNegativeInt | None = None
    tensor_cores: StrictBool | None = None
    instructions: InstructionMix | None = None
    atomics: list[AtomicOp] | None = None
    dots: list[DotOp] | None = None
    loop_barriers: list[str] | None = None
    wgmma_serialized: Serialized | None = None
    hgmma_drained: tuple[NonNegativeInt, NonNegativeInt] | None = None  # (drained, HGMMAs): kbench.analysis.ptxas


class _Launch(_Compiled):
    """What figures.Facts, fusion and the conformance table read of a launch record: its kernel's facts at the top
    level, every Triton kernel the stage launched in ``compiled_kernels``."""

    dataflow: _Dataflow | None = None
    compiled_kernels: dict[str, _Compiled] | None = None


@cache
def _predicted() -> TypeAdapter[Predicted]:
    return TypeAdapter(Predicted)


def launches(records: dict[str, Any], folder: Path) -> dict[str, dict[str, Any]]:
    """The launch records of the run folder ``folder`` by stage, each checked; ConfigError naming the first that
    is malformed."""
    for stage, record in records.items():
        try:
            _Launch.model_validate(record)
        except ValidationError as e:
            path = folder / "tiling" / f"{stage}.json"
            raise ConfigError(
                f"{path} is not a launch record kbench wrote ({first_error(e)}); remove it or fix it"
            ) from None
    return records


def predictions(stages: dict[str, Any], path: Path) -> dict[str, Predicted]:
    """predicted.json's stages as ``Predicted``; ConfigError naming ``path`` where one is malformed."""
    try:
        return {str(stage): _predicted().validate_python(record) for stage, record in stages.items()}
    except ValidationError as e:
        raise ConfigError(
            f"{path} is not an access prediction kbench wrote ({first_error(e)}); remove it or fix it"
        ) from None
