"""The occupancy calculator against Nsight Compute: for every committed capture (H100 and H200), the CTAs per SM
it computes from the kernel's warps, registers and shared memory equal the tightest of ncu's
launch__occupancy_limit_* values, and it names the same limiting resource."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench.analysis import ncu
from kbench.analysis.devices import load_devices
from kbench.analysis.occupancy import ctas_per_sm
from tests.conftest import DATA

CAPTURES = sorted(DATA.glob("validation_h*/*/annotation/profile.ncu-rep"))
LIMITS = {"registers": "ctas_per_sm_registers", "shared memory": "ctas_per_sm_shared", "warps": "ctas_per_sm_warps"}


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: f"{p.parts[-4]}/{p.parts[-3]}")
def test_ctas_per_sm_match_ncu(capture: Path) -> None:
    table = load_devices()
    for k in ncu.kernels(capture):
        spec = next(s for s in table.devices.values() if k.device in s.nvml_names)
        assert spec.limits is not None and k.block is not None
        registers, shared = k.m("registers"), k.m("shared_bytes")
        assert registers is not None and shared is not None
        own_shared = int(shared) - spec.limits.reserved_shared  # ncu counts the system's reserved KB in it
        held = ctas_per_sm(spec.limits, k.block[0] * k.block[1] * k.block[2] // 32, int(registers), own_shared)
        assert held is not None
        ncu_limits = {name: k.m(key) for name, key in LIMITS.items()}
        assert held[0] == k.ctas_per_sm, (k.name, held, ncu_limits)
        if held[1] in LIMITS:  # ncu's shared-memory limit is under the carveout the driver chose, so only the
            assert ncu_limits[held[1]] == held[0]  # binding resource must agree


def test_the_limiter_is_the_tightest_resource() -> None:
    limits = load_devices().devices["H100_SXM"].limits
    assert limits is not None
    assert ctas_per_sm(limits, 32, 58, 128) == (1, "registers")  # 58 x 1024 threads > 32768 registers
    assert ctas_per_sm(limits, 8, 32, 160_000) == (1, "shared memory")
    assert ctas_per_sm(limits, 8, 16, 0) == (8, "warps")
    assert ctas_per_sm(limits, 8, 32, 0) == (8, "registers")  # a tie names what the kernel can change
    assert ctas_per_sm(limits, 1, 16, 0) == (32, "blocks")
    assert ctas_per_sm(limits, 4, 32, 300_000) is None  # does not fit at all
