"""The source a run's plan executed (kbench.plan.sources records it), and what changed in it between two runs: so
that two runs of "the same" version can be told apart, and an edit that was not picked up shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbench.report.sections import Frozen


class Source(Frozen):
    """Each module of the kernel package that the version's module imports (itself, the package's ``__init__``, its
    helpers) by the sha256 of the bytes compiled, keyed by its path relative to the folder holding the package."""

    module: str  # the version's own file, e.g. "matmul/v9.py"
    files: dict[str, str]  # path -> sha256 (hex)
    digest: str  # 12 hex digits naming the whole set (kbench.plan.sources.digest)
    note: str | None = None  # how it was recorded, where that is not the plain case

    @classmethod
    def of(cls, recorded: Any) -> Source | None:
        """A record as params.json or a child's outcome holds it; None for none (or an unreadable one)."""
        if not isinstance(recorded, dict):
            return None
        try:
            return cls.model_validate(recorded)
        except ValueError:
            return None

    def line(self) -> str:
        """The Environment section's account."""
        others = [f"{p} {h[:12]}" for p, h in self.files.items() if p != self.module]
        with_others = f", with {', '.join(others)}" if others else ""
        note = f"; {self.note}" if self.note else ""
        return (
            f"{self.module} {self.files.get(self.module, '')[:12]}{with_others} "
            f"(sha256 of the source that ran; digest {self.digest}){note}"
        )


@dataclass(frozen=True)
class SourceChange:
    changed: bool | None  # None: one of the runs recorded no source
    line: str


def change(previous: Source | None, current: Source | None) -> SourceChange:
    """What changed in the source from ``previous`` to ``current``, in one line."""
    if previous is None or current is None:
        which = "the earlier run" if previous is None else "the later run"
        if previous is None and current is None:
            which = "neither run"
        return SourceChange(None, f"n/a: {which} recorded the source that ran")
    if previous.digest == current.digest:
        return SourceChange(False, f"unchanged (digest {current.digest}): the same code ran in both runs")
    parts = []
    if previous.module != current.module:
        parts.append(f"another version module ({previous.module} -> {current.module})")
    both = sorted(previous.files.keys() & current.files.keys())
    if edited := [p for p in both if previous.files[p] != current.files[p]]:
        parts.append(f"edited: {', '.join(edited)}")
    if added := sorted(current.files.keys() - previous.files.keys() - {current.module}):
        parts.append(f"now imported: {', '.join(added)}")
    if gone := sorted(previous.files.keys() - current.files.keys() - {previous.module}):
        parts.append(f"no longer imported: {', '.join(gone)}")
    if unchanged := [p for p in both if p not in edited]:
        parts.append(f"unchanged: {', '.join(unchanged)}")
    return SourceChange(True, f"changed (digest {previous.digest} -> {current.digest}): {'; '.join(parts)}")
