// AdmissionPolicy: when the scheduler lets a waiting sequence start (scheduler.cpp explains the default).
#pragma once

namespace pagoda::engine {

enum class AdmissionPolicy {
    kPromptOnly,        // when its first chunk's blocks are free now (vLLM V1); growth is left to preemption
    kReserveMaxTokens,  // when the pool carries every sequence up to its max_tokens: no preemption, small batches
    kReserveExpected,   // when the pool carries every sequence up to its expected output length (the default)
};

}  // namespace pagoda::engine
