"""Device peaks from conf/devices.json (validated models) and detection of the active device through NVML.

A device missing from the file is reported as unknown: no other device's numbers are ever used for it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError, model_validator

from kbench.analysis.roofline import Ceilings
from kbench.errors import ConfigError
from kbench.model import Model
from kbench.plan.base import Precision


class Measured(Model):
    """A value measured on a real part, kept beside the datasheet value."""

    model_config = ConfigDict(extra="forbid")
    value: PositiveFloat
    unit: str
    how: str
    date: str


class SmLimits(Model):
    """What one SM holds at once (the occupancy calculator's inputs), with where the numbers come from."""

    model_config = ConfigDict(extra="forbid")
    max_warps: PositiveInt
    max_ctas: PositiveInt
    registers: PositiveInt
    register_unit: PositiveInt  # registers are allocated per warp in multiples of this
    shared_bytes: PositiveInt  # the most shared memory an SM gives its CTAs
    reserved_shared: int = Field(ge=0)  # shared memory the system reserves per CTA
    shared_unit: PositiveInt  # shared memory is allocated per CTA in multiples of this
    source: str = Field(min_length=1)
    # what feeds the tensor cores: shared-memory bytes per clock per SM, and dense tensor FLOPs per clock per SM by
    # operand precision (the narrow-tensor-tiles entry of the catalogue); absent where not known
    shared_bytes_per_clock: PositiveInt | None = None
    tensor_flops_per_clock: dict[Precision, PositiveFloat] = Field(default_factory=dict)
    fp64_per_clock: PositiveInt | None = None  # FP64 instructions (fma) an SM issues per clock
    sm_clock_mhz: PositiveInt | None = None  # the highest SM clock: per-clock rates to per-second ones
    schedulers: PositiveInt | None = None  # warp schedulers per SM (each issues for its own warps)
    fma_latency_cycles: PositiveInt | None = None  # cycles before an FP32 FMA's result can feed the next
    issue_per_clock: PositiveInt | None = None  # warp instructions an SM issues per clock (the issue roof)
    feed_source: str | None = None

    @model_validator(mode="after")
    def _feed_sourced(self) -> SmLimits:
        given = (
            self.shared_bytes_per_clock
            or self.tensor_flops_per_clock
            or self.fp64_per_clock
            or self.sm_clock_mhz
            or self.schedulers
            or self.fma_latency_cycles
            or self.issue_per_clock
        )
        if given and not self.feed_source:
            raise ValueError(
                "feed_source must name where shared_bytes_per_clock, tensor_flops_per_clock, fp64_per_clock, "
                "sm_clock_mhz, schedulers, fma_latency_cycles and issue_per_clock come from"
            )
        return self


# measured streaming bandwidths (conf/devices.json "measured" keys) and what each is: the practical memory roof is the
# highest of them, what a kernel was seen to reach on the device
STREAMS = {
    "dram_gbps": "measured copy",
    "stream_read_gbps": "measured read-only streaming",
    "stream_write_gbps": "measured write-only streaming",
}


class DeviceSpec(Model):
    model_config = ConfigDict(extra="forbid")
    display_name: str
    nvml_names: list[str] = Field(min_length=1)
    arch: str
    sm_count: PositiveInt
    l2_bytes: PositiveInt
    dram_gbps: PositiveFloat
    peak_tflops: dict[Precision, PositiveFloat] = Field(min_length=1)
    sources: dict[str, str]
    measured: dict[str, Measured] = Field(default_factory=dict)
    limits: SmLimits | None = None

    def ceilings(self, key: str) -> dict[str, Ceilings]:
        """Roofs per precision: each precision's peak with the DRAM bandwidth (datasheet values), named by the
        entry's ``key`` in conf/devices.json, as a report's Device line names it."""
        source = f"datasheet peaks of {key} from conf/devices.json"
        return {str(p): Ceilings(tflops=v, gbps=self.dram_gbps, source=source) for p, v in self.peak_tflops.items()}

    def practical(self) -> dict[str, Ceilings]:
        """The roofs a kernel can reach: per precision the measured matmul rate, and the highest streaming bandwidth
        measured (copy, read-only, write-only) where conf/devices.json has them, else the datasheet value; the source
        says which is which."""
        streams = {k: m for k in STREAMS if (m := self.measured.get(k)) is not None}
        best = max(streams, key=lambda k: streams[k].value, default=None)
        gbps = streams[best].value if best else self.dram_gbps
        memory = f"{gbps:g} GB/s {STREAMS[best] if best else 'datasheet'}"
        out = {}
        for p, peak in self.peak_tflops.items():
            m = self.measured.get(f"peak_tflops_{p}")
            tflops = m.value if m else peak
            out[str(p)] = Ceilings(
                tflops=tflops,
                gbps=gbps,
                source=f"{p} {tflops:g} TFLOP/s {'measured' if m else 'datasheet'}, {memory}",
            )
        return out

    @model_validator(mode="after")
    def _sourced(self) -> DeviceSpec:
        missing = [k for k in ("dram_gbps", "peak_tflops", "sm_count", "l2_bytes") if not self.sources.get(k)]
        if missing:
            raise ValueError(f"sources must name where {', '.join(missing)} come from")
        return self


class DeviceTable(Model):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_version: Literal[1] = Field(alias="schema")  # the layout this kbench reads; another is refused
    note: str = ""
    devices: dict[str, DeviceSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _names_unique(self) -> DeviceTable:
        seen: dict[str, str] = {}
        for key, spec in self.devices.items():
            for name in spec.nvml_names:
                if name in seen:
                    raise ValueError(f"GPU name '{name}' is listed under both {seen[name]} and {key}")
                seen[name] = key
        return self

    def match(self, name: str) -> tuple[str, DeviceSpec] | None:
        """The entry whose nvml_names contains ``name`` exactly (NVML's product name)."""
        for key, spec in self.devices.items():
            if name in spec.nvml_names:
                return key, spec
        return None

    def chip_name(self, name: str | None, key: str | None = None) -> str | None:
        """One chip, one name wherever a finished run's device is listed: the display name of the entry that the
        name a run recorded belongs to (NVML's, or the display name a run on the CPU gives), else of the entry its
        recorded ``key`` names; the recorded name as it is where the table knows neither (a cut-down part or a MIG
        slice, which resolve() records as unknown). GPU runs record NVML's "NVIDIA H100 80GB HBM3", runs on the CPU
        the table's "NVIDIA H100 SXM5 80GB": one H100 under two names."""
        named = [s for s in self.devices.values() if name is not None and name in (s.display_name, *s.nvml_names)]
        spec = named[0] if named else self.devices.get(key) if key is not None else None
        return spec.display_name if spec is not None else name


def table_or_none() -> DeviceTable | None:
    """The table in use, or None where it is malformed: a listing then shows the names runs recorded."""
    try:
        return load_devices()
    except ConfigError:
        return None


def chip_name(name: str | None, key: str | None = None) -> str | None:
    """``DeviceTable.chip_name`` of the table in use; the recorded name where the table is malformed."""
    table = table_or_none()
    return table.chip_name(name, key) if table is not None else name


def devices_path() -> Path:
    """KBENCH_DEVICES, else the copy packaged in the wheel, else conf/devices.json of a source checkout."""
    if env := os.environ.get("KBENCH_DEVICES"):
        return Path(env)
    packaged = resources.files("kbench").joinpath("conf/devices.json")
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "conf" / "devices.json"


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if dup := sorted({k for k in keys if keys.count(k) > 1}):
        raise _DuplicateKey(f"key '{dup[0]}' appears twice in one object (the second would silently win)")
    return dict(pairs)


def load_devices(path: Path | None = None) -> DeviceTable:
    path = path or devices_path()
    try:
        raw = json.loads(path.read_text(), object_pairs_hook=_no_duplicate_keys)
    except OSError as e:
        raise ConfigError(
            f"cannot read device table {path}: {e.strerror} (set KBENCH_DEVICES to a valid file)"
        ) from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except _DuplicateKey as e:
        raise ConfigError(f"{path}: {e}") from None
    try:
        return DeviceTable.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ConfigError(f"{path}: field {where}: {err['msg']}") from None


@dataclass(frozen=True)
class ActiveDevice:
    """The GPU kbench runs on: its NVML name and, when conf/devices.json knows it, its peaks."""

    name: str
    key: str | None
    spec: DeviceSpec | None
    driver: str | None = None

    @property
    def known(self) -> bool:
        return self.spec is not None

    def ceilings(self) -> dict[str, Ceilings]:
        """Its entry's datasheet roofs per precision; none for a device conf/devices.json does not know."""
        return self.spec.ceilings(self.key) if self.spec is not None and self.key is not None else {}


def resolve(table: DeviceTable, name: str, driver: str | None = None, sm_count: int | None = None) -> ActiveDevice:
    """The table's entry for NVML's ``name``; a part whose SM count differs (a MIG slice, a cut-down SKU) is
    unknown rather than given the full part's peaks."""
    hit = table.match(name)
    if hit is None:
        return ActiveDevice(name, None, None, driver)
    if sm_count is not None and sm_count != hit[1].sm_count:
        return ActiveDevice(f"{name} ({sm_count} SMs, not {hit[1].sm_count})", None, None, driver)
    return ActiveDevice(name, hit[0], hit[1], driver)


def named_device(table: DeviceTable, key: str) -> ActiveDevice:
    """A device named on the command line by its key in conf/devices.json (or its NVML name)."""
    if key in table.devices:
        spec = table.devices[key]
        return ActiveDevice(spec.nvml_names[0], key, spec)
    hit = table.match(key)
    if hit:
        return ActiveDevice(key, hit[0], hit[1])
    from kbench.errors import UsageError

    raise UsageError(f"unknown device '{key}'; known: {', '.join(table.devices)} (see conf/devices.json)")
