"""hostsync no_sync: the 4 chunk launches queued back to back."""

from __future__ import annotations

from ._common import HostSync


class NoSync(HostSync):
    """no synchronization inside the stage."""


PLAN = NoSync
