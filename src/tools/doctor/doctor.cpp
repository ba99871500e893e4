// Orchestration of the doctor: the benchmarks run before NVML is read so the PCIe link state and
// clocks reflect a GPU that has just been busy rather than one idling at its lowest link speed.
#include "tools/doctor/doctor.h"

#include <algorithm>

#include "tools/doctor/inventory.h"
#include "tools/doctor/measure.h"
#include "tools/doctor/model_fit.h"
#include "tools/doctor/rules.h"

namespace pagoda::doctor {

namespace {

void add_model_rows(const DoctorOptions& options, const Inventory& inv, Report& report) {
    auto model = read_model_footprint(options.model_dir);
    if (!model.ok()) {
        report.add("model", model.message(), Level::kFail,
                   "check that the directory holds config.json and *.safetensors: ls -l " + options.model_dir);
        return;
    }
    FitRequest request;
    request.max_model_len = options.max_model_len;
    request.max_num_seqs = options.max_num_seqs;
    request.gpu_count = static_cast<int>(inv.gpus.size());
    for (const auto& g : inv.gpus)
        if (g.memory_total && (request.gpu_memory_bytes == 0 || *g.memory_total < request.gpu_memory_bytes))
            request.gpu_memory_bytes = *g.memory_total;
    if (options.gpu_memory_gib > 0) {
        request.gpu_memory_bytes = static_cast<uint64_t>(options.gpu_memory_gib * double(1ull << 30));
        request.gpu_count = std::max(request.gpu_count, 1);
    }
    add_fit_rows(*model, request, compute_fit(*model, request), report);
}

}  // namespace

Report run_doctor(const DoctorOptions& options) {
    auto nvml = load_nvml(options.nvml_library);
    DoctorInput in;
    in.quick = options.quick;
    in.cuda = probe_cuda();
    Measurements measurements;
    if (nvml.ok() && !options.quick) {
        MeasureOptions mo;
        mo.loopback = options.loopback;
        measurements = run_measurements(mo);
        in.measurements = &measurements;
    }
    const Status load_status = nvml.ok() ? ok_status() : nvml.status();
    Inventory inv = collect_inventory(nvml.ok() ? nvml->get() : nullptr, load_status, options.root);
    in.inventory = &inv;
    Report report = evaluate(in);
    if (!options.model_dir.empty()) add_model_rows(options, inv, report);
    return report;
}

}  // namespace pagoda::doctor
