// Communicator: the collectives tensor parallelism needs between the ranks that hold the shards of one model.
// Implementations: the size-1 one (a model that is not split; every collective is a no-op), an in-process CPU group
// (one thread per rank, host tensors; for the CPU backend and tests), one rank per process over TCP across nodes
// (tcp_communicator.h; host tensors) and NCCL (nccl_communicator.h; device tensors, in one process or across nodes).
// Contract for every implementation: all ranks call the same collectives with the same shapes in the same order
// (a rank that skips one blocks the others); tensors are contiguous and on the rank's device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace pagoda {

class Communicator {
  public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string name() const = 0;  // "single", "cpu threads", "nccl" (for logs)

    // x = the sum over the ranks of x, in place. Every rank gets the same values.
    virtual void all_reduce_sum(const Tensor& x) = 0;
    // out = every rank's `in` concatenated in rank order: out.numel() == size() * in.numel(), same dtype.
    virtual void all_gather(const Tensor& in, const Tensor& out) = 0;
    // x = `root`'s x on every rank.
    virtual void broadcast(const Tensor& x, int root) = 0;
};

// The size-1 communicator (stateless, shared by every model that is not split). Its all_gather copies host
// tensors and accepts device tensors only in place (in and out the same memory).
Communicator& single_communicator();

// `size` communicators forming one in-process group, element r for rank r; each must be used by one thread at a time
// (the rank's thread). Host F32 tensors for all_reduce_sum; any dtype for all_gather and broadcast. The sum adds the
// ranks in rank order, so every rank gets bit-identical results, and they do not depend on timing.
std::vector<std::unique_ptr<Communicator>> make_cpu_communicators(int size);

}  // namespace pagoda
