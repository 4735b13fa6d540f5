"""What the CPU interpreter's trace of a kernel's memory accesses says (kbench.analysis.access reduces the trace to
these), with no numpy: per load/store source line (``SiteFacts``), per stage for the diagnosis catalogue
(``Predicted``), and as a markdown table. Every figure here is predicted on a CPU: which lanes form a warp is the
compiler's choice; 32 consecutive lanes along the pointer's most contiguous axis (else its last) stand for one. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

SECTOR = 32  # bytes: the unit DRAM and L2 move


@dataclass(frozen=True)
class SiteFacts:
    """One load or store site (a source line) of a kernel, over every program that ran it."""

    kind: str
    site: str
    function: str
    calls: int
    programs: int  # programs that ran the site (of a sample: those traced)
    lanes: int  # over every program the traced ones stand for (a sample's programs weighted)
    active: int
    bytes: int  # active lanes x element size
    stride_bytes: int | None  # the commonest address step between neighbouring active lanes (None: no such pair)
    bytes_per_sector: float | None  # bytes used of each 32-byte sector a warp's lanes touch (32: all of it)
    reuse: float | None  # active element accesses over distinct addresses, across programs (1: each once; None: a
    # sample of the programs ran, which cannot say)
    out_of_bounds: int  # active lanes outside every allocation
    first_oob_program: tuple[int, int, int] | None
    sectors: int = 0  # 32-byte sectors a warp's lanes touch, summed over warps (weighted as ``lanes``)
    distinct_bytes: int | None = None  # bytes at distinct addresses (None: a sample ran)

    @property
    def masked_pct(self) -> float:
        return 100.0 * (1 - self.active / self.lanes) if self.lanes else 0.0

    @classmethod
    def of(cls, record: dict[str, Any]) -> SiteFacts:
        """From its JSON record (access.json)."""
        first = record.get("first_oob_program")
        return cls(**{**record, "first_oob_program": tuple(first) if first else None})

    def record(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def line(self) -> str:
        """The source line, as a file name and line number."""
        path, _, number = self.site.rpartition(":")
        return f"{path.rsplit('/', 1)[-1]}:{number}"


def table(facts: Sequence[SiteFacts], root: str | None = None) -> str:
    """The sites as a markdown table (source paths relative to ``root`` where they lie under it)."""

    def where(site: str) -> str:
        return site.removeprefix(root.rstrip("/") + "/") if root and site.startswith(root) else site

    def num(v: float | None, digits: int = 1) -> str:
        return "n/a" if v is None else f"{v:.{digits}f}"

    lines = [
        "| site | kind | programs | bytes | masked lanes % | lane stride (B) | bytes used / 32-B sector | reuse "
        "| out of bounds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in facts:
        stride = "n/a" if f.stride_bytes is None else str(f.stride_bytes)
        lines.append(
            f"| {where(f.site)} ({f.function}) | {f.kind} | {f.programs} | {f.bytes} | {f.masked_pct:.1f} | {stride} | "
            f"{num(f.bytes_per_sector)} | {num(f.reuse, 2)} | {f.out_of_bounds} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Predicted:
    """One stage's loads and stores as the interpreter predicted them, for the catalogue: sectors touched and bytes
    used per sector by kind (as ncu counts them: l1tex sectors of global loads and stores), the share of lanes
    masked off, and the lines behind each."""

    where: str  # the point traced, in words ("at n=1048576, 17 of 1024 programs traced")
    ld_sectors: float | None
    st_sectors: float | None
    ld_use: float | None  # bytes used of each 32-byte sector, of 32
    st_use: float | None
    worst: SiteFacts | None  # the site using the fewest bytes per sector
    masked_pct: float  # lanes masked off at the stage's loads and stores, of all their lanes
    load_masked_pct: float  # the same over its loads alone
    most_masked: SiteFacts | None  # the site with the most masked lanes
    requested_bytes: int  # what the active lanes load and store
    distinct_bytes: int | None  # of which at distinct addresses (None: a sample of the programs ran)
    config: dict[str, Any] = field(default_factory=dict)  # the launch configuration traced
    # bytes at distinct addresses over the plan's model, where every program ran: at the traced point, else at the
    # check parameters (said in ``beyond_where``); None where neither ran whole
    beyond_model: float | None = None
    beyond_where: str = ""
    # per atomic line (file:line): the distinct addresses its active lanes hit, where every program ran
    atomic_addresses: dict[str, int] = field(default_factory=dict)
    # how evenly its programs share the work: the bytes the largest traced program loads and stores, the mean over
    # the programs (a sample's weighted), and the largest programs in words ("program (63, 0, 0): 2.1e+06 B")
    program_max_bytes: float | None = None
    program_mean_bytes: float | None = None
    longest_programs: tuple[str, ...] = ()

    @property
    def program_spread(self) -> float | None:
        """The largest program's work over the mean program's (1: even)."""
        if not self.program_max_bytes or not self.program_mean_bytes:
            return None
        return self.program_max_bytes / self.program_mean_bytes

    def record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, facts: Sequence[SiteFacts], where: str, config: dict[str, Any] | None = None) -> Predicted | None:
        """The stage's summary (None: no load or store ran)."""
        if not facts:
            return None
        # lines whose lanes have neighbours: a one-lane access (a scalar a program stores) uses its element's bytes of
        # a sector whatever the layout, and is no coalescing question
        spread = [f for f in facts if f.stride_bytes is not None]
        by_kind = {
            kind: [f for f in spread if f.kind == kind and f.sectors and f.bytes_per_sector is not None]
            for kind in ("load", "store")
        }

        def use(kind: str) -> tuple[float | None, float | None]:
            sites = by_kind[kind]
            sectors = sum(f.sectors for f in sites)
            return (float(sectors), sum(f.bytes for f in sites) / sectors) if sectors else (None, None)

        (ld_sectors, ld_use), (st_sectors, st_use) = use("load"), use("store")
        scored = [f for f in spread if f.bytes_per_sector is not None]
        lanes = sum(f.lanes for f in facts)
        loads = [f for f in facts if f.kind == "load"]
        load_lanes = sum(f.lanes for f in loads)
        distinct = [f.distinct_bytes for f in facts]
        return cls(
            where=where,
            ld_sectors=ld_sectors,
            st_sectors=st_sectors,
            ld_use=ld_use,
            st_use=st_use,
            worst=min(scored, key=lambda f: (f.bytes_per_sector, -f.sectors)) if scored else None,
            masked_pct=100.0 * (1 - sum(f.active for f in facts) / lanes) if lanes else 0.0,
            load_masked_pct=100.0 * (1 - sum(f.active for f in loads) / load_lanes) if load_lanes else 0.0,
            most_masked=max(facts, key=lambda f: (f.masked_pct, f.lanes)),
            requested_bytes=sum(f.bytes for f in facts),
            distinct_bytes=None if None in distinct else sum(d or 0 for d in distinct),
            config=dict(config or {}),
            atomic_addresses={
                f.line: f.distinct_bytes * f.active // f.bytes
                for f in facts
                if f.kind == "atomic" and f.distinct_bytes is not None and f.bytes
            },
        )
