// Builds without CUDA or without NCCL: the NCCL communicator functions say so.
#include "dist/nccl_communicator.h"

namespace pagoda {

namespace {
Status not_built() {
    return Status::error("this pagoda was built without NCCL (CUDA and NCCL are needed)");
}
}  // namespace

void set_nccl_environment() {}  // nothing reads it without NCCL

bool nccl_compiled() {
    return false;
}

Result<std::vector<std::unique_ptr<Communicator>>> make_nccl_communicators(std::span<const int>,
                                                                           std::span<void* const>) {
    return not_built();
}
Result<NcclUniqueId> make_nccl_unique_id() {
    return not_built();
}
Result<std::vector<std::unique_ptr<Communicator>>> make_nccl_communicators(const NcclUniqueId&, int, int,
                                                                           std::span<const int>,
                                                                           std::span<void* const>) {
    return not_built();
}

}  // namespace pagoda
