// Gathers the inventory through an NvmlSource (real or fake) and the host files.
#include "tools/doctor/inventory.h"

namespace pagoda::doctor {

Inventory collect_inventory(NvmlSource* nvml, const Status& load_status, const std::string& root) {
    Inventory inv;
    inv.host = read_host_info(root);
    inv.driver = load_status;
    if (!nvml) {
        if (inv.driver.ok()) inv.driver = Status::error("no NVIDIA driver: NVML not loaded");
        return inv;
    }
    auto system = nvml->system();
    if (!system.ok()) {
        inv.driver = system.status();
        return inv;
    }
    inv.system = *system;
    for (unsigned i = 0; i < inv.system.device_count; ++i) {
        auto g = nvml->gpu(i);
        if (!g.ok()) {
            inv.gpu_errors.push_back(g.message());
            continue;
        }
        inv.gpu_host.push_back(read_gpu_host_info(root, g->bus_id));
        inv.gpus.push_back(std::move(g).value());
    }
    const size_t n = inv.gpus.size();
    inv.topology.assign(n, std::vector<std::optional<TopologyLevel>>(n));
    inv.p2p_read.assign(n, std::vector<std::optional<bool>>(n));
    for (size_t a = 0; a < n; ++a)
        for (size_t b = 0; b < n; ++b) {
            if (a == b) continue;
            inv.topology[a][b] = nvml->topology(inv.gpus[a].index, inv.gpus[b].index);
            inv.p2p_read[a][b] = nvml->p2p_read_ok(inv.gpus[a].index, inv.gpus[b].index);
        }
    return inv;
}

}  // namespace pagoda::doctor
