// A C entry point over FlashMLA's SM90 dense decode (deepseek-ai/FlashMLA, csrc/), so kbench's peer benchmark can call
// it through ctypes with raw pointers: no PyTorch headers, so one build here loads under any torch on the device.
// Built by scripts/mla-peers/build-carry.sh against FlashMLA's csrc and a CUTLASS 4.x include tree; the arguments follow
// FlashMLA's own dense_attn_decode_interface (csrc/api/dense_decode.h) with one latent head (h_k = 1).
#include <cmath>

#include <cuda_runtime_api.h>

#include "params.h"
#include "sm90/decode/dense/splitkv_mla.h"
#include "smxx/decode/combine/combine.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"

extern "C" {

// Ints per scheduler entry (the metadata tensor is [num_sm_parts, this] int32).
int flashmla_sched_meta_ints() { return int(sizeof(DecodingSchedMeta) / sizeof(int)); }

// FlashMLA's split count for one latent head: SMs / ceil(s_q * h_q / 64), at least 1.
int flashmla_num_sm_parts(int num_sms, int s_q, int h_q) {
    int m_blocks = (s_q * h_q + 63) / 64;
    int parts = num_sms / m_blocks;
    return parts > 1 ? parts : 1;
}

// get_mla_metadata: the per-SM-part schedule over the batch's cache lengths (run once per batch, outside timing).
int flashmla_get_metadata(int b, int s_q, int* seqlens_k, void* sched_meta, int* num_splits, int num_sm_parts,
                          void* stream) {
    GetDecodeSchedMetaParams p = {b, s_q, 64, 5, -1, -1, nullptr, nullptr, seqlens_k,
                                  (DecodingSchedMeta*)sched_meta, num_splits, num_sm_parts, (cudaStream_t)stream};
    smxx::decode::run_get_decoding_sched_meta_kernel(p);
    return int(cudaGetLastError());
}

// One decode step, bf16: q [b, s_q, h_q, 576] contiguous, kcache [num_blocks, 64, 576] (the page pool), block_table
// [b, bt_stride] int32, seqlens_k [b] int32; out [b, s_q, h_q, 512] bf16; lse [b, s_q*h_q] and the split buffers
// lse_accum [b + num_sm_parts, s_q*h_q], o_accum [b + num_sm_parts, s_q*h_q, 512] float32.
int flashmla_dense_decode_bf16(int b, int s_q, int h_q, int num_blocks, void* q, void* kcache, int* block_table,
                               long long bt_stride, int* seqlens_k, float scale, int causal, void* sched_meta,
                               int* num_splits, int num_sm_parts, void* out, float* lse, float* lse_accum,
                               float* o_accum, void* stream) {
    const int d = 576, d_v = 512, rows = s_q * h_q;  // rows: q_seq_per_hk with h_k = 1
    DenseAttnDecodeParams p = {};
    p.b = b;
    p.s_q = s_q;
    p.q_seq_per_hk = rows;
    p.d = d;
    p.d_v = d_v;
    p.h_q = h_q;
    p.h_k = 1;
    p.num_blocks = num_blocks;
    p.q_head_per_hk = h_q;
    p.is_causal = causal != 0 && s_q > 1;
    p.scale_softmax = scale;
    p.scale_softmax_log2 = float(scale * M_LOG2E);
    p.q_ptr = q;
    p.k_ptr = kcache;
    p.o_ptr = out;
    p.softmax_lse_ptr = lse;
    p.q_batch_stride = (long long)rows * d;
    p.k_batch_stride = 64LL * d;
    p.o_batch_stride = (long long)rows * d_v;
    p.q_row_stride = d;
    p.k_row_stride = d;
    p.o_row_stride = d_v;
    p.q_head_stride = d;
    p.k_head_stride = d;
    p.o_head_stride = (long long)rows * d_v;
    p.block_table = block_table;
    p.block_table_batch_stride = bt_stride;
    p.page_block_size = 64;
    p.seqlens_k_ptr = seqlens_k;
    p.tile_scheduler_metadata_ptr = (DecodingSchedMeta*)sched_meta;
    p.num_sm_parts = num_sm_parts;
    p.num_splits_ptr = num_splits;
    p.total_num_splits = b + num_sm_parts;
    p.softmax_lseaccum_ptr = lse_accum;
    p.oaccum_ptr = o_accum;
    p.stream = (cudaStream_t)stream;
    sm90::run_flash_splitkv_mla_kernel<cutlass::bfloat16_t>(p);

    CombineParams c = {b, s_q, h_q, d_v,
                       lse, out, rows, h_q, h_q * s_q * d_v, h_q * d_v, d_v,
                       lse_accum, o_accum, rows, h_q, h_q * s_q * d_v, h_q * d_v, d_v,
                       (DecodingSchedMeta*)sched_meta, num_splits, num_sm_parts,
                       nullptr, (cudaStream_t)stream};
    smxx::decode::run_flash_mla_combine_kernel<cutlass::bfloat16_t>(c);
    return int(cudaGetLastError());
}

}  // extern "C"
