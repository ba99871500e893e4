// The CUDA entry points of a build without CUDA: every GPU query answers "none".
#include "runtime/cuda_backend.h"
#include "runtime/device_sampler.h"

namespace pagoda {

bool cuda_compiled() {
    return false;
}
int cuda_device_count() {
    return 0;
}
Result<CudaDeviceInfo> cuda_device_info(int) {
    return Status::error("this pagoda was built without CUDA");
}
bool cuda_runs_op(std::string_view) {
    return false;
}
Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions&) {
    return Status::error("this pagoda was built without CUDA (configure on a machine with nvcc)");
}

void* cuda_stream_handle(Backend&) {
    return nullptr;
}

Result<QueuedTiming> cuda_time_queued(Backend&, const std::function<void()>&, double) {
    return Status::error("this pagoda was built without CUDA");
}

Result<double> cuda_time_span(Backend&, const std::function<void()>&) {
    return Status::error("this pagoda was built without CUDA");
}

std::unique_ptr<DeviceSampler> make_device_sampler(Backend&) {
    return nullptr;
}

}  // namespace pagoda
