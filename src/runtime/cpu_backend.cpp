// The CPU backend: host memory, OpenMP threads, CpuOps.
#include <omp.h>

#include <cstring>

#include "common/check.h"
#include "runtime/backend.h"
#include "runtime/cpu_ops.h"

namespace pagoda {

namespace {

class ArrivedCopy final : public PendingCopy {
  public:
    bool arrived() override { return true; }
    void wait() override {}
};

}  // namespace

std::unique_ptr<PendingCopy> Backend::copy_behind(const Tensor& dst, const Tensor& src) {
    copy(dst, src);
    return std::make_unique<ArrivedCopy>();
}

namespace {
class CpuBackend final : public Backend {
  public:
    explicit CpuBackend(const CpuBackendOptions& options) : ops_(make_cpu_ops()), requested_(options.num_threads) {
        bind_thread();
        threads_ = omp_get_max_threads();
    }
    Device device() const override { return {}; }
    std::string name() const override { return "cpu (" + std::to_string(threads_) + " threads)"; }
    Ops& ops() override { return *ops_; }
    Allocator& allocator() override { return host_allocator(); }
    void copy(const Tensor& dst, const Tensor& src) override {
        PAGODA_CHECK_MSG(dst.is_host() && src.is_host(), "cpu backend copies host tensors only");
        PAGODA_CHECK_MSG(dst.dtype() == src.dtype() && dst.shape() == src.shape(), "copy: dtype/shape differ");
        PAGODA_CHECK_MSG(dst.is_contiguous() && src.is_contiguous(), "copy: contiguous tensors only");
        std::memcpy(dst.data(), src.data(), src.nbytes());
    }
    void synchronize() override {}
    void bind_thread() override {
        if (requested_ > 0) omp_set_num_threads(requested_);  // OpenMP's thread count is a per-thread setting
    }

  private:
    std::unique_ptr<Ops> ops_;
    int requested_ = 0;  // 0: OpenMP's default
    int threads_ = 1;
};
}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
    return std::make_unique<CpuBackend>(options);
}

}  // namespace pagoda
