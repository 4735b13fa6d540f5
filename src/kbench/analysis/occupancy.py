"""How many CTAs of a kernel one SM holds at once, from its warps, registers and shared memory and the SM's limits
(conf/devices.json ``limits``): the occupancy calculator event mode needs, where ncu is not there to say. Pure."""

from __future__ import annotations

import math

from kbench.analysis.devices import SmLimits


def ctas_per_sm(
    limits: SmLimits, warps: int, registers: int | None, shared_bytes: int | None
) -> tuple[int, str] | None:
    """The CTAs one SM holds and what limits them ("registers", "shared memory", "warps", "blocks"); None when the
    kernel's warps are unknown or a CTA does not fit at all."""
    if warps <= 0:
        return None
    limit = {"warps": limits.max_warps // warps, "blocks": limits.max_ctas}
    if registers:
        per_warp = math.ceil(registers * 32 / limits.register_unit) * limits.register_unit
        limit["registers"] = (limits.registers // per_warp) // warps
    if shared_bytes is not None:
        per_cta = math.ceil((shared_bytes + limits.reserved_shared) / limits.shared_unit) * limits.shared_unit
        limit["shared memory"] = limits.shared_bytes // per_cta
    # the tightest limit; on a tie the resource a kernel can change (registers, shared memory) is named first
    order = ["registers", "shared memory", "warps", "blocks"]
    name = min((k for k in order if k in limit), key=lambda k: (limit[k], order.index(k)))
    return (limit[name], name) if limit[name] > 0 else None
