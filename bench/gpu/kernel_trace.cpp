// Every kernel a CUDA program runs, with its start and end on the GPU, written as tab-separated lines when the program
// exits: a CUPTI injection library, for where Nsight Systems is missing (the GPU machine's nsys has no importer, so
// its reports cannot be opened there). Kernels replayed from a CUDA graph are recorded node by node with the
// correlation id of the graph's launch, which is what bench/gpu/graph_timeline.py groups replays by.
//
//   CUDA_INJECTION64_PATH=libpagoda_kernel_trace.so PAGODA_KERNEL_TRACE=trace.tsv pagoda_cuda_bench ...
//
// Columns: start_ns, end_ns, correlation_id, graph_id, graph_node_id, name (demangled). The driver loads the library
// at cuInit and calls InitializeInjection; the records are written from an atexit handler registered there.
#include <cupti.h>

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8 << 20;

struct KernelRecord {
    uint64_t start = 0;
    uint64_t end = 0;
    uint32_t correlation_id = 0;
    uint32_t graph_id = 0;
    uint64_t graph_node_id = 0;
    std::string name;
};

std::mutex records_mutex;
std::vector<KernelRecord>& records() {
    static auto* all = new std::vector<KernelRecord>();  // never destroyed: the atexit handler runs late
    return *all;
}

void check(CUptiResult result, const char* what) {
    if (result == CUPTI_SUCCESS) return;
    const char* text = nullptr;
    cuptiGetResultString(result, &text);
    std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, text ? text : "?");
}

std::string demangle(const char* name) {
    if (name == nullptr) return "?";
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
    return status == 0 && out ? std::string(out.get()) : std::string(name);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = kBufferBytes;
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* record = nullptr;
    std::vector<KernelRecord> batch;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        // The record is of the newest kernel version this header names, which is the version the library fills when
        // header and library are the same release (the library travels with the build: pack_carry.sh).
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        batch.push_back({k->start, k->end, k->correlationId, k->graphId, k->graphNodeId, demangle(k->name)});
    }
    std::free(buffer);
    std::lock_guard<std::mutex> lock(records_mutex);
    auto& all = records();
    all.insert(all.end(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
}

void write_records() {
    check(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
    const char* path = std::getenv("PAGODA_KERNEL_TRACE");
    std::FILE* out = std::fopen(path && *path ? path : "kernel_trace.tsv", "w");
    if (out == nullptr) {
        std::perror("kernel_trace: cannot write the trace");
        return;
    }
    std::lock_guard<std::mutex> lock(records_mutex);
    for (const auto& r : records()) {
        std::fprintf(out, "%llu\t%llu\t%u\t%u\t%llu\t%s\n", static_cast<unsigned long long>(r.start),
                     static_cast<unsigned long long>(r.end), r.correlation_id, r.graph_id,
                     static_cast<unsigned long long>(r.graph_node_id), r.name.c_str());
    }
    std::fclose(out);
    std::fprintf(stderr, "kernel_trace: %zu kernels written\n", records().size());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    // CONCURRENT_KERNEL keeps kernels overlapping as they ran (KERNEL would serialise them).
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
    std::atexit(write_records);
    return 1;
}
