// Many host-to-host copies run by several threads at once. Stacking a MoE checkpoint's per-expert tensors copies
// gigabytes out of the mapped checkpoint into fresh buffers (Qwen3-30B-A3B: 57 GB), and one thread does it at the
// speed of its page faults (~1.2 GB/s measured: 15.6 s for 16 of its 48 layers); the faults of several threads
// proceed in parallel.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

namespace pagoda {

struct CopyJob {
    void* dst;
    const void* src;
    size_t bytes;
};

// Runs every job (memcpy) on up to `max_threads` threads (0: the machine's cores), the bytes split evenly, large jobs
// cut in pieces. Returns when all are done.
void parallel_copy(std::span<const CopyJob> jobs, unsigned max_threads = 0);

// Runs fn(i) for every i in [0, count) on up to `max_threads` threads (0: the machine's cores), each thread taking the
// next index; fn must be safe to run concurrently. Returns when all are done. For work that is more than a copy
// (int4 experts repacked out of the mapping: the page faults and the unpacking both proceed in parallel).
void parallel_for(size_t count, const std::function<void(size_t)>& fn, unsigned max_threads = 0);

}  // namespace pagoda
