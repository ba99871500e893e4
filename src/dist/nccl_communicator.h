// NCCL communicators for tensor parallelism on NVIDIA GPUs. Compiled when the build has CUDA and finds NCCL
// (nccl_communicator.cpp); otherwise every function returns an error saying so (nccl_stub.cpp). No CUDA or NCCL
// header leaks from here: streams are passed as void* (a cudaStream_t).
// NVLink SHARP / multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 is set before every communicator is created.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "runtime/communicator.h"

namespace pagoda {

// True when this binary has the NCCL communicator.
bool nccl_compiled();

// Sets NCCL_NVLS_ENABLE=0 unless it already is 0. The communicator factories below call it too, but setenv races
// with every other thread's getenv, so a program calls it first, before it starts threads (cli/main.cpp);
// afterwards the factories only read the variable.
void set_nccl_environment();

// One process, one thread per GPU (what `--tensor-parallel-size N` uses): N communicators over devices[r], created
// together (ncclCommInitAll). streams[r] is the cudaStream_t rank r's CUDA backend runs its kernels on, so that the
// collectives are ordered with them; element r is rank r's communicator, to be used from rank r's thread only.
Result<std::vector<std::unique_ptr<Communicator>>> make_nccl_communicators(std::span<const int> devices,
                                                                           std::span<void* const> streams);

// Several processes (one per node, launched by mpirun or a LeaderWorkerSet): rank 0 creates the id, the node group
// (node_group.h) hands it to every process, and each joins with its GPUs through make_nccl_communicators below.
using NcclUniqueId = std::array<char, 128>;  // NCCL_UNIQUE_ID_BYTES
Result<NcclUniqueId> make_nccl_unique_id();

// One process of a group that spans several processes (a node of a multi-node group, docs/deployment-multinode.md):
// this process's devices.size() ranks, global ranks first_rank .. first_rank + devices.size() - 1 of world_size,
// joined to the group of `id` together. ncclCommInitRank blocks until every rank of the group has joined, so the local
// ranks are initialised inside one ncclGroupStart/ncclGroupEnd (one after another they would wait for each other);
// the call returns when every process of the group has joined. Element i is global rank first_rank + i, on
// devices[i], ordered with streams[i]; each to be used from that rank's thread only.
Result<std::vector<std::unique_ptr<Communicator>>> make_nccl_communicators(const NcclUniqueId& id, int world_size,
                                                                           int first_rank, std::span<const int> devices,
                                                                           std::span<void* const> streams);

}  // namespace pagoda
