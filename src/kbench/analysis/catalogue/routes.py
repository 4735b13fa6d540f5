"""The routes past a choice the compiler made that the kernel's source cannot change in its language (a product
Triton's layout makes every warpgroup repeat, a loop its pipeliner left, wgmmas ptxas serialized for lack of
registers), each with what it measured in this repository (H100, Triton 3.6), for the change lines of the entries
that name those choices; and the entry for ptxas's serialized wgmmas. Pure."""

from __future__ import annotations

from kbench.analysis import bottleneck as b
from kbench.analysis.catalogue.evidence import Evidence, Opportunity, finding

# what each route past an unpipelined loop measured in this repository (H100, Triton 3.6)
PIPELINE_ROUTES = (
    "mla_decode v4, whose tl.debug_barrier left its loop unpipelined, ran 298.3 us; with the barrier in inline PTX "
    "and the loop pipelined (36 cp.async) 323.7 and 301.5 us in two runs, docs/benchmarks/mla_decode-variants-"
    "h100.txt: no faster, the L2 round trip of its exchange stayed in every iteration",
    "TMA descriptors (tl.make_tensor_descriptor, then .load in the loop: Triton pipelines them as asynchronous "
    "copies; mla_decode v5's TMA tiles in place of cp.async: 255.4 against 258.8 us, same file)",
    "Gluon's explicit pipeline (TMA copies into a ring of shared-memory stages under mbarriers, written by hand: "
    "mla_decode v7, 156.60 us against the fused Triton v6's 244.07 in one benchmark run, "
    "docs/benchmarks/mla_decode-h100.txt, with its other changes)",
)


# the routes past work repeated by warpgroups, each with what it measured in this repository (H100)
GLUON_LAYOUT = (
    "a Gluon kernel that lays the chained product out per warpgroup (the first product's accumulator over "
    "warpsPerCTA [4, 2], each warpgroup computing half of it, P passed through shared memory: mla_decode v7, "
    "src/kbench/kernel/mla_decode/v7.py, 156.60 us against the fused Triton v6's 244.07 in one benchmark run and "
    "160.29 against 250.28 in another, docs/benchmarks/mla_decode-h100.txt)"
)
RUNTIME_BRANCH = (
    "the softmax step under a runtime branch that is always taken, which Triton may then lay out on a [4, 2] grid (a "
    "user's MLA rewrite: 226.1 us where v6 took 246.9; here it did not work on Triton 3.6: mla_decode v6_branch, the "
    "branch alone, kept [8, 1] and ran 442.60 us against v6's 244.07, docs/kernels/mla_decode.md): check the "
    "TTGIR's warpsPerCTA after trying it"
)
# the route past narrow tensor tiles where warpgroups split one tile's columns (each reads all of the other operand
# for part of the product; whole tiles per warpgroup read it once per tile), with what it measured (H100, issue 52)
SEESAW = (
    "where warpgroups split one tile's columns, each warpgroup a whole tile of its own, alternate tiles, the output "
    "split by columns and the probabilities and rescale factors exchanged (FlashMLA's seesaw, gl.warp_specialize; "
    "mla_decode v10 -> v11 on the H100: est. 20.9%, realized 12.1%)"
)
ONE_WARPGROUP = (
    "chain split -> whole at d=128, one warpgroup holding the accumulator: 26.0-26.8% realized, docs/diagnosis.md"
)
EXCHANGE = (
    "the warpgroups split the first product's columns (Triton splits a product that does not feed a dot from "
    "registers) and pass it to each other through shared or global memory, keeping the loop pipelined (mla_decode "
    "v4 passed it through a global scratch with tl.debug_barrier, which stopped the pipelining: 293.2 us against "
    "v2's 250.3, docs/kernels/mla_decode.md)"
)


# ptxas's serialized wgmmas: the routes that reached it in this repository, with what they measured (H100)
SERIALIZED_ROUTES_GLUON = (
    "an operand in shared memory instead of registers (A as an NVMMASharedLayout descriptor, not a DotOperandLayout: "
    "mla_decode v8's first cut held Q's half in registers, ptxas serialized its wgmmas, and Q's latent half in "
    "shared memory took it from 248.9 to 167.6 us, docs/kernels/mla_decode.md), a smaller accumulator per warpgroup "
    "(warps_per_cta splitting its N over more warpgroups), or warp specialization with setmaxnreg "
    "(gl.warp_specialize's worker registers: a copying partition's registers go to the MMA partitions; not measured "
    "here on its own)"
)
SERIALIZED_ROUTES_TRITON = (
    "a smaller accumulator per warpgroup: more warps on the same tile (mla_decode v2's attention at d=512 on 4 warps "
    "ran 475.9 us, 258.8 on 8, docs/benchmarks/mla_decode-variants-h100.txt; ptxas serializes its wgmmas on 4: "
    "tests/data/ptxas_sm90) or a smaller BLOCK_M or BLOCK_N; tl.dot operands loaded from memory rather than another "
    "dot's result held in registers; where no tile fits, a kernel with explicit warpgroups and setmaxnreg (Gluon's "
    "gl.warp_specialize: mla_decode v8's first cut -> v8, Q's latent half moved from registers to shared memory, "
    "248.9 -> 167.6 us, docs/kernels/mla_decode.md)"
)
DRAINED_HGMMAS = 2  # fewer HGMMAs each waited for say nothing of a pipeline


def serialized_wgmma(e: Evidence) -> Opportunity | None:
    """Warpgroup MMAs ptxas serialized for lack of registers: its advisory (compiled/<stage>/ptxas.txt), or where
    ptxas's messages are not at hand the SASS waiting for every HGMMA before the next (``WARPGROUP.DEPBAR.LE gsb0,
    0x0``) in a kernel at REGISTERS_FULL or more registers per thread. No model of what serialized MMAs cost is
    measured on this device: the gain is the distance to the roof, an upper bound, and says so."""
    said, drained = e.wgmma_serialized, e.hgmma_drained
    every = drained is not None and drained[1] >= DRAINED_HGMMAS and drained[0] == drained[1]
    if said is not None and not said.registers:
        return None  # another cause ptxas names (an accumulator written between wgmmas, ...): no route measured here
    if said is None and not (every and e.registers is not None and e.registers >= b.REGISTERS_FULL):
        return None
    seen = [f'ptxas: "{said.message}"'] if said else []
    if every and drained:
        waits = "WARPGROUP.DEPBAR.LE gsb0, 0x0"
        seen.append(f"its SASS waits for each of its {drained[1]} HGMMAs ({waits}) before the next")
    regs = f" (now {e.registers:.0f} registers per thread)" if e.registers is not None else ""
    return finding(
        e,
        f"wgmma serialized by ptxas for lack of registers in {e.where}: {'; '.join(seen)}; gain up to the distance "
        "to the roof (what serialized MMAs cost is not modelled)",
        e.gap_us,
        (f"{e.name}.wgmma_serialized", said.code if said else "SASS"),  # ptxas's advisory number, else the SASS
        f"free registers in each warpgroup that issues {e.name}'s MMAs{regs}: "
        + (SERIALIZED_ROUTES_GLUON if e.gluon else SERIALIZED_ROUTES_TRITON),
    )
