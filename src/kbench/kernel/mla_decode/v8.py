"""mla_decode v8: v7's fused kernel with the work split by the contraction, warp-specialized (Gluon). v7's two
warpgroups split the scores' columns (m64n32 wgmmas, both reading all of Q from shared memory: kbench's Top 1 on
v7, narrow tensor tiles, shared memory feeding at most 79% of the tensor rate). Here each warpgroup computes the
whole 64 x 64 score tile over its half of the 576 columns (m64n64 wgmmas: its 256 latent columns with Q from shared
memory, its 32 rotary columns with Q in registers); the first warpgroup's partial goes through shared memory to the
second, which adds its own and writes the sum back (two mbarriers); both then hold the same scores, softmax and
probabilities, in registers, and multiply them by their half of the values (m64n256, A from registers) into their
half of the output. A third partition, one warp, copies the cache tiles by TMA into two stages as soon as both
warpgroups are done with a stage, a whole tile ahead. Measured on the H100 (issue 44): 2.7% slower than v7, the
exchange serializing the warpgroups once a tile; kept as a measured step (docs/kernels/mla_decode.md)."""

from __future__ import annotations

from typing import Any, ClassVar

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, warpgroup_mma

from kbench.plan.base import Config, Launch, Stage

from .v3 import SplitWorkspace
from .v7 import MlaDecodeGluon, _load_tile, _softmax, _tma_load

# the mbarriers: a stage's tile landed / released by both warpgroups; the first warpgroup's partial scores written, the
# second's sum of both written back; Q landed
KV_FULL = gl.constexpr(0)
KV_EMPTY = gl.constexpr(2)
X_HALF = gl.constexpr(4)
X_SUM = gl.constexpr(5)
Q_FULL = gl.constexpr(6)


@gluon.jit
def _v8_loader(q_desc, kv_desc, kpe_desc, q_s, kv_s, kpe_s, bars, b, t, row0, BLOCK_N: gl.constexpr):  # type: ignore[no-untyped-def]
    """The copying partition: Q's latent columns once, then tile j into stage j % 2 once both warpgroups released
    that stage's tile j - 2."""
    mbarrier.expect(bars.index(Q_FULL), q_desc.block_type.nbytes)
    _tma_load(q_desc, [row0, 0], bars.index(Q_FULL), q_s)
    for j in range(0, gl.cdiv(t, BLOCK_N)):
        st = j % 2
        mbarrier.wait(bars.index(KV_EMPTY + st), ((j // 2) + 1) & 1, pred=j >= 2)
        _load_tile(kv_desc, kpe_desc, bars.index(KV_FULL + st), kv_s.index(st), kpe_s.index(st), b * t + j * BLOCK_N,
                   True)  # fmt: skip


@gluon.jit
def _v8_consumer(W: gl.constexpr, q_pe_ptr, o_ptr, q_s, kv_s, kpe_s, x_s, bars, scale, s, t, R, b, pid,  # type: ignore[no-untyped-def]
                 H: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):  # fmt: skip
    """Warpgroup W: the whole score tile over its half of the contraction (Q's latent half from shared memory, its
    rotary half in registers), summed with the other's through shared memory; then both hold the same softmax."""
    D: gl.constexpr = kv_s.shape[2]
    P: gl.constexpr = kpe_s.shape[2]
    DH: gl.constexpr = D // 2
    PH: gl.constexpr = P // 2
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])  # fmt: skip
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, DH, 16])  # fmt: skip
    q_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)

    # loaded in an accumulator layout whose elements sit where the A operand's do: the conversion is in registers
    load: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, PH, 16])
    q_rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, load))
    rope = W * PH + gl.arange(0, PH, layout=gl.SliceLayout(0, load))
    qp = gl.load(q_pe_ptr + (b * R + q_rows[:, None]) * P + rope[None, :], mask=q_rows[:, None] < R, other=0.0)
    qp = gl.convert_layout(qp, q_layout)
    qn = q_s.slice(W * DH, DH, dim=1)

    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    m = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    total = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, DH], gl.float32, o_layout)
    mbarrier.wait(bars.index(Q_FULL), 0)
    for j in range(0, gl.cdiv(t, BLOCK_N)):
        st = j % 2
        mbarrier.wait(bars.index(KV_FULL + st), (j // 2) & 1)
        kv = kv_s.index(st).slice(W * DH, DH, dim=1)  # this warpgroup's half: keys' and values' columns alike
        sc = warpgroup_mma(qn, kv.permute((1, 0)), zero_s, use_acc=False)
        sc = warpgroup_mma(qp, kpe_s.index(st).slice(W * PH, PH, dim=1).permute((1, 0)), sc)
        if W == 0:  # its partial out, the sum of both back
            x_s.store(sc)
            mbarrier.arrive(bars.index(X_HALF))
            mbarrier.wait(bars.index(X_SUM), j & 1)
            sc = x_s.load(s_layout)
        else:  # the first warpgroup's partial in, the sum out
            mbarrier.wait(bars.index(X_HALF), j & 1)
            sc = sc + x_s.load(s_layout)
            x_s.store(sc)
            mbarrier.arrive(bars.index(X_SUM))
        m, alpha, prob = _softmax(sc, rows, j * BLOCK_N, m, scale, s, t, H, BLOCK_N)
        total = total * alpha + gl.sum(prob, axis=1)
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
        acc = warpgroup_mma(gl.convert_layout(prob.to(kv_s.dtype), p_layout), kv, acc)
        mbarrier.arrive(bars.index(KV_EMPTY + st))  # this warpgroup is done with the stage

    out = acc / gl.convert_layout(total, gl.SliceLayout(1, o_layout))[:, None]
    o_rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, o_layout))
    dd = W * DH + gl.arange(0, DH, layout=gl.SliceLayout(0, o_layout))
    gl.store(o_ptr + (b * R + o_rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty),
             mask=o_rows[:, None] < R)  # fmt: skip


@gluon.jit
def mla_v8_kernel(q_desc, q_pe_ptr, kv_desc, kpe_desc, o_ptr, scale, s, t, R, H: gl.constexpr,  # type: ignore[no-untyped-def]
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, REGS: gl.constexpr,
                  num_warps: gl.constexpr):  # fmt: skip
    D: gl.constexpr = kv_desc.block_type.shape[1]
    P: gl.constexpr = kpe_desc.block_type.shape[1]
    dtype: gl.constexpr = kv_desc.dtype
    gl.static_assert(num_warps == 4, "the default partition is the first warpgroup")
    pid = gl.program_id(0)
    b = gl.program_id(1)
    row0 = b * R + pid * BLOCK_M  # rows past this sequence's R read the next one's queries: never stored
    q_s = gl.allocate_shared_memory(dtype, [BLOCK_M, D], q_desc.layout)
    kv_s = gl.allocate_shared_memory(dtype, [2, BLOCK_N, D], kv_desc.layout)
    kpe_s = gl.allocate_shared_memory(dtype, [2, BLOCK_N, P], kpe_desc.layout)
    x_s = gl.allocate_shared_memory(gl.float32, [BLOCK_M, BLOCK_N],
                                    gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], gl.float32))  # fmt: skip
    bars = gl.allocate_shared_memory(gl.int64, [7, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(bars.index(KV_FULL + i), count=1)  # the loader's expect (bytes)
        mbarrier.init(bars.index(KV_EMPTY + i), count=2)  # one arrive per warpgroup
    for i in gl.static_range(3):
        mbarrier.init(bars.index(X_HALF + i), count=1)
    fence_async_shared()
    gl.warp_specialize(  # the tuples written out: a tuple kept in a variable turns its constexprs into tensors
        [
            (_v8_consumer, (0, q_pe_ptr, o_ptr, q_s, kv_s, kpe_s, x_s, bars, scale, s, t, R, b, pid, H, BLOCK_M,
                            BLOCK_N)),
            (_v8_consumer, (1, q_pe_ptr, o_ptr, q_s, kv_s, kpe_s, x_s, bars, scale, s, t, R, b, pid, H, BLOCK_M,
                            BLOCK_N)),
            (_v8_loader, (q_desc, kv_desc, kpe_desc, q_s, kv_s, kpe_s, bars, b, t, row0, BLOCK_N)),
        ],
        [4, 1],
        [REGS, 24],
    )  # fmt: skip


class MlaDecodeSplitQ(MlaDecodeGluon):
    """v7's dispatch with v8's warp-specialized kernel on the fused path."""

    # the fused grid as v7's check has it, with rotary columns enough for each warpgroup's half to be a wgmma K step
    check_params: ClassVar[dict[str, Any]] = {**MlaDecodeGluon.check_params, "p": 32}
    GLUON_TILES: ClassVar[list[Config]] = [{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "REGS": 240}]

    def gluon(self) -> bool:
        """16-bit elements, D 32..512 and P at least 32 (each warpgroup's half of the rotary columns: a wgmma K
        step)."""
        return super().gluon() and self.p >= 32

    def stages(self) -> list[Stage]:
        if not (self.fused() and self.gluon()):
            return super().stages()
        return [self.attention_stage(self._fused, self.GLUON_TILES, ["mla_v8_kernel"])]

    def _fused(self, ws: SplitWorkspace, cfg: Config) -> Launch:
        if not self.gluon():
            return super()._fused(ws, cfg)
        m, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
        q_desc = self.descriptor(ws.q_nope.view(self.b * self.rows, self.d), [m, self.d])
        kv_desc, kpe_desc = self.tiles(ws, bn)
        grid = (triton.cdiv(self.rows, m), self.b)
        kernel = mla_v8_kernel[grid]
        args = {"H": self.h, "BLOCK_M": m, "BLOCK_N": bn, "REGS": cfg["REGS"], "num_warps": 4}
        shape = (self.scale, self.s, self.t, self.rows)
        return Launch(lambda: kernel(q_desc, ws.q_pe, kv_desc, kpe_desc, ws.out, *shape, **args), grid)


PLAN = MlaDecodeSplitQ
