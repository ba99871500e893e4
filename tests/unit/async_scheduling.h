// Async scheduling under test: ctest runs the engine and executor tests a second time with
// PAGODA_TEST_ASYNC_SCHEDULING=1 in the environment (tests/unit/engine/CMakeLists.txt, tests/unit/executor/...).
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "engine/pipelined_runner.h"

namespace pagoda::engine::testing {

inline bool testing_async_scheduling() {
    const char* v = std::getenv("PAGODA_TEST_ASYNC_SCHEDULING");
    return v != nullptr && std::string(v) == "1";
}

// What a test hands Engine::create: `r` behind a PipelinedRunner (the engine then launches steps ahead) when testing
// async scheduling, else `r` itself. The PipelinedRunner lives until the process exits; idle, it never touches `r`.
inline ModelRunner& engine_runner(ModelRunner& r) {
    if (!testing_async_scheduling()) return r;
    static std::vector<std::unique_ptr<PipelinedRunner>> runners;
    return *runners.emplace_back(std::make_unique<PipelinedRunner>(r));
}

}  // namespace pagoda::engine::testing
