// Built when PAGODA_CUDA is OFF: the doctor still runs every NVML, /proc and /sys check and says
// plainly that this build cannot measure.
#include "tools/doctor/measure.h"

namespace pagoda::doctor {

CudaProbe probe_cuda() {
    CudaProbe probe;
    probe.error = "this pagoda was built without CUDA (PAGODA_CUDA=OFF)";
    return probe;
}

Measurements run_measurements(const MeasureOptions&) {
    Measurements m;
    m.not_run = "this pagoda was built without CUDA (PAGODA_CUDA=OFF)";
    return m;
}

}  // namespace pagoda::doctor
