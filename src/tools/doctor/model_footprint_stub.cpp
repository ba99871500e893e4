// Built when pagoda_model is not part of the build (the doctor-only GPU build).
#include "tools/doctor/model_fit.h"

namespace pagoda::doctor {

Result<ModelFootprint> read_model_footprint(const std::string&) {
    return Status::error("this pagoda was built without the model library; --model is unavailable");
}

}  // namespace pagoda::doctor
