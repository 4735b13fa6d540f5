"""KernelPlan: the unit a user writes. One module per version, each exporting ``PLAN = <subclass>``.

A plan is a frozen pydantic model whose fields are the kernel's parameters (validated before anything
touches a GPU). It declares its stages in execution order; each stage carries its analytic FLOP and DRAM
byte counts and a ``build`` function that turns (workspace, tuning config) into a launch-only callable,
so allocation and setup stay outside the timed region.
"""

from __future__ import annotations

import math
import numbers
import re
import typing
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import annotated_types
from pydantic import ConfigDict, Field

from kbench.model import Model

# The meta-parameters of one tuning configuration: constexpr block sizes plus num_warps / num_stages.
Config = dict[str, int]
Precision = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"]
PRECISIONS: tuple[str, ...] = typing.get_args(Precision)
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "int8": 1}


def param(default: Any, *, help: str, ge: float | None = None, le: float | None = None) -> Any:
    """Declare a plan parameter: default, inclusive range and the help shown by ``--list``."""
    return Field(default, description=help, ge=ge, le=le)


@dataclass(frozen=True)
class Launch:
    """A launch-only callable for one stage, and the grid it launches (None for library calls)."""

    fn: Callable[[], object]
    grid: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Stage:
    """One kernel launch (or a small fixed group) of a plan, with its analytic cost model."""

    name: str
    flops: float
    dram_bytes: float
    precision: Precision
    build: Callable[[Any, Config], Launch]
    # First entry is the default; more than one entry means the stage is autotuned over them.
    tuning: Sequence[Config] = field(default_factory=lambda: [{}])
    # Names of the GPU kernels this stage is expected to launch (for conformance checks); "" = library.
    kernels: Sequence[str] = ()
    # Concurrency: the logical CUDA stream the stage runs on (0 = the caller's stream; stages on one stream run
    # in declared order) and the earlier stages whose results it reads on other streams (ordered with events).
    stream: int = 0
    after: Sequence[str] = ()
    # Data flow (the fusion diagnosis): the workspace tensors (names, as found in setup()'s dict, list or object) the
    # stage reads and writes. Leave empty to have kbench infer them from the tensors its launches receive; declare
    # them for calls it cannot watch (a CUDA extension, a library outside PyTorch).
    reads: Sequence[str] = ()
    writes: Sequence[str] = ()
    # The intra-kernel timeline (--prof_type=intra): the names of the tasks the stage's kernel records (task_type i
    # is tasks[i]), and a build that launches it recording into a profiler buffer (kbench.plan.intra.Profiler).
    tasks: Sequence[str] = ()
    build_intra: Callable[[Any, Config, Any], Launch] | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", self.name):
            raise ValueError(f"stage name {self.name!r}: use letters, digits and _ . : - only (no '/')")
        if not self.tuning:
            raise ValueError(f"stage {self.name!r}: tuning needs at least one configuration")
        if (self.build_intra is None) != (not self.tasks):
            raise ValueError(f"stage {self.name!r}: tasks and build_intra come together (the tasks it records)")
        if self.stream < 0:
            raise ValueError(f"stage {self.name!r}: stream must be 0 (the caller's) or a positive stream number")


@dataclass(frozen=True)
class ParamInfo:
    """A parameter as the CLI and ``--list`` describe it."""

    name: str
    type_name: str
    default: Any
    help: str
    ge: float | None = None
    le: float | None = None
    choices: tuple[Any, ...] = ()

    def describe(self) -> str:
        bits = [f"--{self.name}={self.default}", self.type_name]
        if self.choices:
            bits.append("one of " + "|".join(str(c) for c in self.choices))
        if self.ge is not None or self.le is not None:
            bits.append(
                f"range {self.ge if self.ge is not None else '-inf'}..{self.le if self.le is not None else 'inf'}"
            )
        return f"{'  '.join(bits)}  {self.help}".rstrip()

    def phrase(self) -> str:
        """The parameter in one sentence-like line, for messages: ``--dtype (choice: bfloat16|float16; default
        bfloat16): element type``."""
        what = [self.type_name]
        if self.choices:
            what.append(": " + "|".join(str(c) for c in self.choices))
        if self.ge is not None or self.le is not None:
            what.append(f", {self.ge if self.ge is not None else '-inf'}..{self.le if self.le is not None else 'inf'}")
        return f"--{self.name} ({''.join(what)}; default {self.default})" + (f": {self.help}" if self.help else "")


class KernelPlan(Model):
    """Base class of every plan version. Subclasses declare fields with :func:`param` and a ``dtype``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Parameter overrides for `kbench check` under Triton's CPU interpreter (small sizes).
    check_params: ClassVar[dict[str, Any]] = {}
    # Relative L2 error allowed against the reference, per dtype.
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 1.5e-2}

    dtype: str

    # -- identity: derived from where the class lives (<package>.<version>) ---------------------------
    @classmethod
    def package_name(cls) -> str:
        return cls.__module__.split(".")[-2]

    @classmethod
    def version_name(cls) -> str:
        return cls.__module__.split(".")[-1]

    @property
    def package(self) -> str:
        return self.package_name()

    @property
    def version(self) -> str:
        return self.version_name()

    # -- what a version declares -----------------------------------------------------------------------
    @abstractmethod
    def stages(self) -> list[Stage]:
        """The stages in execution order."""

    @abstractmethod
    def setup(self, device: str, seed: int) -> Any:
        """Allocate inputs (random, from ``seed``) and outputs on ``device``; return the workspace."""

    @abstractmethod
    def output(self, ws: Any) -> Any:
        """The tensor the last stage writes (the correctness check poisons it before running)."""

    @abstractmethod
    def reference(self, ws: Any) -> Any:
        """The expected output from a PyTorch implementation in higher precision."""

    # -- helpers ----------------------------------------------------------------------------------------
    def checked_stages(self) -> list[Stage]:
        """``stages()``, refused (one UsageError line: the plan is at fault) when it raises, is empty, repeats a
        name (their figures would collide), declares a cost that is not a finite number >= 0, or orders a
        dependency after its user."""
        from kbench.errors import UsageError, first_line

        try:
            stages = self.stages()
        except UsageError:
            raise
        except Exception as e:
            raise UsageError(
                f"{self.package} {self.version}: stages() raised {type(e).__name__}: {first_line(e)}"
            ) from e
        for s in stages:
            for what in ("flops", "dram_bytes"):
                v = getattr(s, what)
                if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0:
                    raise UsageError(
                        f"{self.package} {self.version}: stage {s.name} declares {what}={v!r}; "
                        "it must be a finite number >= 0 (the analytic model of the stage)"
                    )
        names = [s.name for s in stages]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if not stages or repeated:
            what = "declares no stage" if not stages else f"repeats stage name(s) {', '.join(repeated)}"
            raise UsageError(f"{self.package} {self.version} {what}; each stage needs a unique name")
        for i, s in enumerate(stages):
            bad = [d for d in s.after if d not in names[:i]]
            if bad:
                raise UsageError(
                    f"{self.package} {self.version}: stage {s.name} runs after {', '.join(bad)}, which is not a stage "
                    "declared before it; list stages in an order that respects their dependencies"
                )
        return stages

    def concurrent(self) -> bool:
        """Whether the stages use more than one CUDA stream (a pipeline / concurrent-kernels plan)."""
        return len({s.stream for s in self.checked_stages()}) > 1

    def values(self) -> dict[str, Any]:
        """Parameter values in declared order, dtype last (the Configuration table's order)."""
        data = self.model_dump()
        dtype = data.pop("dtype")
        return {**data, "dtype": dtype}

    def slug(self) -> str:
        """A stable, filesystem-safe spelling of the parameters, e.g. ``m4096_n4096_k4096_bfloat16``."""
        from kbench.fsutil import safe

        parts = [f"{k}{v}" for k, v in self.slug_values().items() if k != "dtype"]
        return safe("_".join([*parts, str(self.dtype)]))

    def slug_values(self) -> dict[str, Any]:
        """The values the slug spells (all of them; a plan may leave out parameters added after its runs were named)."""
        return self.values()

    def torch_dtype(self) -> Any:
        import torch

        return getattr(torch, self.dtype)

    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def rtol(self) -> float:
        return self.tolerance[self.dtype]

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> KernelPlan:
        """Validate ``values`` (strings allowed, as from a command line) into a plan; UsageError if bad."""
        from pydantic import ValidationError

        from kbench.errors import UsageError

        known = cls.params()
        unknown = [k for k in values if k not in {p.name for p in known}]
        if unknown:
            raise UsageError(
                f"unknown parameter --{unknown[0]} for {cls.package_name()} {cls.version_name()}; "
                f"valid: {', '.join(p.describe().split('  ')[0] for p in known)}"
            )
        # a command line gives strings: a choice of numbers (Literal[64, 128]) takes the one its text names
        choices = {p.name: p.choices for p in known if p.choices}
        values = {
            k: next((c for c in choices[k] if str(c) == v), v) if isinstance(v, str) and k in choices else v
            for k, v in values.items()
        }
        try:
            plan = cls.model_validate(values)
        except ValidationError as e:
            err = e.errors()[0]
            if not err["loc"]:  # the plan's own check of a combination of parameters
                why = str(err["msg"]).removeprefix("Value error, ")
                raise UsageError(
                    f"{cls.package_name()} {cls.version_name()} cannot run these parameters: {why}"
                ) from None
            name = str(err["loc"][0])
            info = next((p for p in known if p.name == name), None)
            hint = f"; expected {info.phrase()}" if info else ""
            raise UsageError(f"bad parameter --{name}={values.get(name)!s}: {err['msg']}{hint}") from None
        if plan.dtype not in plan.tolerance or plan.dtype not in DTYPE_BYTES:
            raise UsageError(
                f"{cls.package_name()} {cls.version_name()} allows dtype {plan.dtype} but declares no tolerance "
                f"or element size for it (KernelPlan.tolerance, kbench.plan.base.DTYPE_BYTES)"
            )
        return plan

    @classmethod
    def params(cls) -> list[ParamInfo]:
        out: list[ParamInfo] = []
        for name, f in cls.model_fields.items():
            ge = next((m.ge for m in f.metadata if isinstance(m, annotated_types.Ge)), None)
            le = next((m.le for m in f.metadata if isinstance(m, annotated_types.Le)), None)
            ann = f.annotation
            choices = typing.get_args(ann) if typing.get_origin(ann) is Literal else ()
            type_name = "choice" if choices else getattr(ann, "__name__", str(ann))
            out.append(ParamInfo(name, type_name, f.default, f.description or "", ge, le, choices))  # type: ignore[arg-type]
        dtype = [p for p in out if p.name == "dtype"]
        return [p for p in out if p.name != "dtype"] + dtype
