// The CUDA DeviceSampler: one upload (rows and edits, through pinned staging), one kernel, one download of the
// results. The device buffers grow with the batch and are kept, so steady-state steps allocate nothing.
#include <cstring>
#include <string>

#include "common/align.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda/internal.h"
#include "runtime/device_sampler.h"

namespace pagoda {

namespace {

namespace kcu = kernels::cuda;
using kernels::LogitEdit;
using kernels::SampledToken;
using kernels::SampleRow;

class CudaSampler final : public DeviceSampler {
  public:
    explicit CudaSampler(cudaStream_t stream) : stream_(stream) {}

    Status sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<const LogitEdit> edits,
                  std::span<const uint32_t> masks, std::span<SampledToken> out) override {
        if (rows.empty()) return ok_status();
        if (logits.device().kind != DeviceKind::Cuda || logits.dtype() != DType::F32 || logits.rank() != 2 ||
            logits.stride(1) != 1)
            return Status::error("sample: logits must be a CUDA F32 [R, V] tensor, got " + logits.to_string());
        if (out.size() != rows.size()) return Status::error("sample: one output per row");
        const int64_t R = logits.dim(0), V = logits.dim(1);
        const int64_t mask_words = (V + 31) / 32;
        const int64_t mask_rows = static_cast<int64_t>(masks.size()) / mask_words;
        for (const SampleRow& r : rows) {
            if (r.logits_row < 0 || r.logits_row >= R || r.edit_begin < 0 || r.edit_begin > r.edit_end ||
                r.edit_end > static_cast<int32_t>(edits.size()) || r.num_top > kernels::kSampleMaxTop ||
                r.mask_row < -1 || r.mask_row >= mask_rows)
                return Status::error("sample: row arguments out of range");
        }
        for (const LogitEdit& e : edits)
            if (e.token < 0 || e.token >= V)
                return Status::error("sample: edit token " + std::to_string(e.token) + " outside the vocabulary");

        // One upload: rows, edits and the structured-output masks (bit-packed: 19 KB a row for Qwen's vocabulary).
        const size_t rows_bytes = align_up(rows.size_bytes(), 256), edits_bytes = align_up(edits.size_bytes(), 256);
        const size_t masks_bytes = align_up(masks.size_bytes(), 256);
        const size_t upload = rows_bytes + edits_bytes + masks_bytes;
        const size_t raw_bytes = align_up(edits.size() * sizeof(float), 256), out_bytes = out.size_bytes();
        auto* host = static_cast<char*>(staging_.get(upload));
        std::memcpy(host, rows.data(), rows.size_bytes());
        if (!edits.empty()) std::memcpy(host + rows_bytes, edits.data(), edits.size_bytes());
        if (!masks.empty()) std::memcpy(host + rows_bytes + edits_bytes, masks.data(), masks.size_bytes());
        auto* dev = static_cast<char*>(device_.get(upload + raw_bytes + out_bytes, stream_));
        PAGODA_CUDA_OK(cudaMemcpyAsync(dev, host, upload, cudaMemcpyHostToDevice, stream_));

        kcu::SampleArgs a{};
        a.logits = logits.data_as<float>(), a.stride = logits.stride(0), a.V = V;
        a.rows = reinterpret_cast<const SampleRow*>(dev);
        a.num_rows = static_cast<int32_t>(rows.size());
        a.edits = reinterpret_cast<const LogitEdit*>(dev + rows_bytes);
        a.masks = reinterpret_cast<const uint32_t*>(dev + rows_bytes + edits_bytes);
        a.mask_words = mask_words;
        a.edit_raw = reinterpret_cast<float*>(dev + upload);
        a.out = reinterpret_cast<SampledToken*>(dev + upload + raw_bytes);
        kcu::launch_sample(a, stream_);
        auto* result = static_cast<SampledToken*>(results_.get(out_bytes));
        PAGODA_CUDA_OK(cudaMemcpyAsync(result, a.out, out_bytes, cudaMemcpyDeviceToHost, stream_));
        // The staging memory is rewritten by the next call, and the caller reads the results now.
        PAGODA_CUDA_OK(cudaStreamSynchronize(stream_));
        std::memcpy(out.data(), result, out_bytes);  // a row with every token masked out has token -1 (error = 1)
        return ok_status();
    }

  private:
    cudaStream_t stream_;
    PinnedScratch staging_;
    PinnedScratch results_;
    DeviceScratch device_;
};

}  // namespace

std::unique_ptr<DeviceSampler> make_device_sampler(Backend& backend) {
    cudaStream_t stream = cuda_stream_of(backend);
    if (stream == nullptr) return nullptr;
    return std::make_unique<CudaSampler>(stream);
}

}  // namespace pagoda
