"""hostsync per_chunk: ``torch.cuda.synchronize()`` after each of 4 chunk launches: each waits for the GPU, and the
GPU then idles while the host returns from the wait and launches the next chunk. Fix: no synchronization inside the
stage (no_sync)."""

from __future__ import annotations

from typing import ClassVar

from ._common import HostSync


class PerChunk(HostSync):
    """a synchronization after each chunk."""

    SYNC: ClassVar[bool] = True


PLAN = PerChunk
