"""A stand-in for the driver's clock control (kbench.capture.clocks.ClockControl): records what it is asked to
do, answers reads from a script of readings, and can refuse to lock as a non-root user would be refused."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kbench.analysis.clocks import Reading
from kbench.capture.clocks import ClockPermission


class FakeClocks:
    def __init__(self, readings: list[Reading] | None = None, *, permitted: bool = True, index: int = 0) -> None:
        self.index = index
        self.permitted = permitted
        self.calls: list[str] = []
        self._readings = itertools.cycle(readings or [Reading(1980, 2619, 0)])

    def read(self) -> Reading:
        return next(self._readings)

    def base_sm_mhz(self) -> int | None:
        return 1590

    def max_sm_mhz(self) -> int | None:
        return 1980

    def max_mem_mhz(self) -> int | None:
        return 2619

    def lock(self, sm_mhz: int, mem_mhz: int | None) -> bool:
        if not self.permitted:
            raise ClockPermission("NVML nvmlDeviceSetGpuLockedClocks: no permission")
        self.calls.append(f"lock {sm_mhz} {mem_mhz}")
        return True

    def reset(self, mem: bool) -> None:
        if not self.permitted:
            raise ClockPermission("NVML nvmlDeviceResetGpuLockedClocks: no permission")
        self.calls.append(f"reset mem={mem}")

    @contextmanager
    def as_control(self) -> Iterator[FakeClocks]:
        yield self


# A stand-in nvidia-smi for the lock scripts and SmiControl (bash, so any user can run it): two GPUs, the queries
# they make, and the clock commands, logged one line each to $FAKE_SMI_LOG. FAKE_SMI_NO_LMC=1: memory clocks
# cannot be locked; FAKE_SMI_DENY=1: clock changes are refused as for a user without root.
FAKE_SMI = r"""#!/bin/bash
echo "$*" >> "$FAKE_SMI_LOG"
gpu=0; query=""; act=""
while [ $# -gt 0 ]; do
  case $1 in
    -i) gpu=$2; shift ;;
    --query-gpu=*|--query-supported-clocks=*) query=$1 ;;
    -lgc|-lmc|-rgc|-rmc) act=$1 ;;
  esac
  shift
done
field() {
  case $1 in
    index) printf '0\n1\n' ;;
    clocks.default_applications.graphics) [ "$gpu" = 1 ] && echo 1755 || echo 1590 ;;
    clocks.sm) echo 1755 ;;
    clocks.mem|clocks.max.memory) echo 2619 ;;
    clocks.max.sm) echo 1980 ;;
    clocks_event_reasons.active) echo 0x0000000000000004 ;;
    *) exit 2 ;;
  esac
}
case $query in
  --query-gpu=index) field index; exit 0 ;;
  --query-gpu=*) IFS=, read -ra fs <<< "${query#*=}"; row=""
    for f in "${fs[@]}"; do row="$row${row:+, }$(field "$f")"; done; echo "$row"; exit 0 ;;
  --query-supported-clocks=graphics) seq 1980 -15 345; exit 0 ;;
  --query-supported-clocks=memory) echo 2619; exit 0 ;;
esac
if [ -n "$act" ]; then
  if [ -n "$FAKE_SMI_DENY" ]; then
    echo "Setting locked GPU clocks is not supported for this user; insufficient permissions (root needed)"; exit 4
  fi
  if [ -n "$FAKE_SMI_NO_LMC" ] && { [ "$act" = -lmc ] || [ "$act" = -rmc ]; }; then
    echo "Setting memory clocks is not supported for GPU 00000000:18:00.0."; exit 3
  fi
  echo "All done."; exit 0
fi
exit 2
"""


def install_fake_smi(folder: Path) -> tuple[Path, Path]:
    """Write the stand-in nvidia-smi into ``folder``; returns (its path, its log)."""
    smi = folder / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    log = folder / "smi.log"
    log.write_text("")
    return smi, log
