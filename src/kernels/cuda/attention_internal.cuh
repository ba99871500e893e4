// Shared by the paged-attention .cu files: the decode-only kernel (decode_attention.cu) that launch_paged_attention
// (attention.cu) picks for batches of one query token per sequence.
#pragma once

#include "kernels/cuda/common.cuh"

namespace pagoda::kernels::cuda {

// Which sequences a kernel launch serves: the batch is split by query length when both kinds are present.
enum class SeqFilter : int { All, SingleToken, MultiToken, None };
__device__ __forceinline__ bool serves(SeqFilter f, int qlen) {
    return f == SeqFilter::All || (f == SeqFilter::SingleToken) == (qlen == 1);
}

// True when the head shape has a decode kernel (D 64/128/256, G <= 16).
bool decode_attention_applies(const PagedAttentionArgs& a);
// Grid (1, num_seqs, H_kv * num_splits); same workspace layout as the general kernel.
void launch_decode_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream);

// True when the tensor-core prefill kernel applies (BF16 caches, D 64/128/256); it needs num_splits == 1.
bool prefill_attention_applies(const PagedAttentionArgs& a);
void launch_prefill_attention(const PagedAttentionArgs& a, SeqFilter filter, cudaStream_t stream);

}  // namespace pagoda::kernels::cuda
