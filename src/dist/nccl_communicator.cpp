// The NCCL communicator: collectives on device tensors, enqueued on the rank's stream (no host synchronisation).
#include "dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/check.h"

static_assert(sizeof(ncclUniqueId) == std::tuple_size_v<pagoda::NcclUniqueId>, "NCCL_UNIQUE_ID_BYTES changed");

// Collectives: a failure is a broken invariant (a rank out of step, a lost peer); abort with NCCL's reason.
#define PAGODA_NCCL_OK(expr)                                                                          \
    do {                                                                                              \
        const ncclResult_t pagoda_r_ = (expr);                                                        \
        if (pagoda_r_ != ncclSuccess) [[unlikely]]                                                    \
            ::pagoda::detail::check_failed(__FILE__, __LINE__, #expr, ncclGetErrorString(pagoda_r_)); \
    } while (0)

namespace pagoda {

namespace {

Status nccl_error(const std::string& what, ncclResult_t r) {
    return Status::error(what + ": " + ncclGetErrorString(r) + " (NCCL " + std::to_string(NCCL_MAJOR) + "." +
                         std::to_string(NCCL_MINOR) + "; NCCL_DEBUG=INFO says more)");
}

ncclDataType_t nccl_type(DType dtype) {
    switch (dtype) {
        case DType::F32:
            return ncclFloat32;
        case DType::BF16:
            return ncclBfloat16;
        case DType::F16:
            return ncclFloat16;
        case DType::I32:
            return ncclInt32;
        case DType::I64:
            return ncclInt64;
        default:
            break;
    }
    PAGODA_CHECK_MSG(false, "nccl: unsupported dtype");
    return ncclFloat32;
}

class NcclCommunicator final : public Communicator {
  public:
    NcclCommunicator(ncclComm_t comm, int rank, int size, int device, cudaStream_t stream)
        : comm_(comm), rank_(rank), size_(size), device_(device), stream_(stream) {}
    ~NcclCommunicator() override {
        int current = 0;  // destroy on the communicator's device, then leave the caller's device as it was
        const bool known = cudaGetDevice(&current) == cudaSuccess;
        cudaSetDevice(device_);
        ncclCommDestroy(comm_);
        if (known) cudaSetDevice(current);
    }
    NcclCommunicator(const NcclCommunicator&) = delete;
    NcclCommunicator& operator=(const NcclCommunicator&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string name() const override { return "nccl"; }

    void all_reduce_sum(const Tensor& x) override {
        check(x);
        PAGODA_NCCL_OK(ncclAllReduce(x.data(), x.data(), static_cast<size_t>(x.numel()), nccl_type(x.dtype()), ncclSum,
                                     comm_, stream_));
    }
    void all_gather(const Tensor& in, const Tensor& out) override {
        check(in);
        check(out);
        PAGODA_CHECK_MSG(in.dtype() == out.dtype() && out.numel() == in.numel() * size_,
                         "all_gather: out must hold size() times in");
        PAGODA_NCCL_OK(ncclAllGather(in.data(), out.data(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()),
                                     comm_, stream_));
    }
    void broadcast(const Tensor& x, int root) override {
        check(x);
        PAGODA_CHECK_MSG(root >= 0 && root < size_, "broadcast: root outside group");
        PAGODA_NCCL_OK(ncclBroadcast(x.data(), x.data(), static_cast<size_t>(x.numel()), nccl_type(x.dtype()), root,
                                     comm_, stream_));
    }

  private:
    void check(const Tensor& t) const {
        PAGODA_CHECK_MSG(t.device().kind == DeviceKind::Cuda && t.device().index == device_,
                         "nccl: tensor is not on this rank's GPU");
        PAGODA_CHECK_MSG(t.is_contiguous(), "nccl: contiguous tensors only");
    }

    ncclComm_t comm_;
    int rank_, size_, device_;
    cudaStream_t stream_;
};

}  // namespace

bool nccl_compiled() {
    return true;
}

Result<std::vector<std::unique_ptr<Communicator>>> make_nccl_communicators(std::span<const int> devices,
                                                                           std::span<void* const> streams) {
    const int n = static_cast<int>(devices.size());
    if (n < 1 || streams.size() != devices.size()) {
        return Status::error("make_nccl_communicators: one stream per device, at least one device");
    }
    set_nccl_environment();
    std::vector<ncclComm_t> raw(static_cast<size_t>(n));
    if (ncclResult_t r = ncclCommInitAll(raw.data(), n, devices.data()); r != ncclSuccess) {
        return nccl_error("creating NCCL communicators for " + std::to_string(n) + " GPUs", r);
    }
    std::vector<std::unique_ptr<Communicator>> comms;
    for (int r = 0; r < n; ++r) {
        comms.push_back(std::make_unique<NcclCommunicator>(raw[static_cast<size_t>(r)], r, n,
                                                           devices[static_cast<size_t>(r)],
                                                           static_cast<cudaStream_t>(streams[static_cast<size_t>(r)])));
    }
    return comms;
}

// NVLink multicast (NVLS) stays off: it reserves a large share of device memory per communicator and is not
// available on every system; the ring/tree algorithms serve TP all-reduce sizes well.
void set_nccl_environment() {
    const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
    if (nvls == nullptr || std::strcmp(nvls, "0") != 0) setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/1);
}

Result<NcclUniqueId> make_nccl_unique_id() {
    set_nccl_environment();
    ncclUniqueId id;
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return nccl_error("ncclGetUniqueId", r);
    NcclUniqueId out;
    std::memcpy(out.data(), id.internal, out.size());
    return out;
}

Result<std::vector<std::unique_ptr<Communicator>>> make_nccl_communicators(const NcclUniqueId& id, int world_size,
                                                                           int first_rank, std::span<const int> devices,
                                                                           std::span<void* const> streams) {
    const int n = static_cast<int>(devices.size());
    if (n < 1 || streams.size() != devices.size()) {
        return Status::error("make_nccl_communicators: one stream per device, at least one device");
    }
    if (first_rank < 0 || first_rank + n > world_size) {
        return Status::error("NCCL ranks " + std::to_string(first_rank) + ".." + std::to_string(first_rank + n - 1) +
                             " outside a group of " + std::to_string(world_size));
    }
    set_nccl_environment();
    int previous = 0;  // the caller's device, selected again at the end
    const bool known = cudaGetDevice(&previous) == cudaSuccess;
    // Every device is checked before the group call: a failure inside it would leave the ranks already queued
    // waiting in ncclGroupEnd for the ones never started.
    for (int device : devices) {
        if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
            if (known) cudaSetDevice(previous);
            return Status::error("GPU " + std::to_string(device) + ": " + cudaGetErrorString(e));
        }
    }
    ncclUniqueId nccl_id;
    std::memcpy(nccl_id.internal, id.data(), id.size());
    std::vector<ncclComm_t> raw(static_cast<size_t>(n), nullptr);
    Status failed;
    // NCCL's pattern for several devices of one process joining a group that spans processes: select each device
    // and join, all inside one group call; ncclGroupEnd returns once every rank of every process has joined.
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return nccl_error("ncclGroupStart", r);
    for (int i = 0; i < n && failed.ok(); ++i) {
        const int device = devices[static_cast<size_t>(i)];
        if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
            failed = Status::error("GPU " + std::to_string(device) + ": " + cudaGetErrorString(e));
        } else if (r = ncclCommInitRank(&raw[static_cast<size_t>(i)], world_size, nccl_id, first_rank + i);
                   r != ncclSuccess) {
            failed = nccl_error("joining the NCCL group as rank " + std::to_string(first_rank + i) + " of " +
                                    std::to_string(world_size),
                                r);
        }
    }
    // Always closed, even after a failure above: the group call must end before anything else uses NCCL.
    if (r = ncclGroupEnd(); r != ncclSuccess && failed.ok()) {
        failed = nccl_error("joining the NCCL group of " + std::to_string(world_size) + " ranks as ranks " +
                                std::to_string(first_rank) + ".." + std::to_string(first_rank + n - 1),
                            r);
    }
    if (!failed.ok()) {
        for (ncclComm_t comm : raw)
            if (comm != nullptr) ncclCommAbort(comm);  // a half-made group: abort, do not wait for the others
        if (known) cudaSetDevice(previous);
        return failed;
    }
    std::vector<std::unique_ptr<Communicator>> comms;
    for (int i = 0; i < n; ++i) {
        comms.push_back(std::make_unique<NcclCommunicator>(raw[static_cast<size_t>(i)], first_rank + i, world_size,
                                                           devices[static_cast<size_t>(i)],
                                                           static_cast<cudaStream_t>(streams[static_cast<size_t>(i)])));
    }
    if (known) cudaSetDevice(previous);
    return comms;
}

}  // namespace pagoda
