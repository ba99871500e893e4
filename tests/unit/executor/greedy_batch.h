// Test helper shared by the tensor-parallel engine tests: three greedy requests submitted together, so that they
// share steps (prefill chunks and decodes in one batch), read to the end.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "executor/create_engine.h"

namespace pagoda::executor {

// Each request's greedy tokens (12, ignore_eos) and their logprobs, in submission order; the prompts are slices of
// `ids` (at least 100 ids).
struct Greedy {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<float>> logprobs;
};

inline Greedy greedy_batch(ServingEngine& s, const std::vector<int32_t>& ids) {
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (auto [begin, end] : {std::pair{0, 100}, std::pair{5, 40}, std::pair{60, 61}}) {
        engine::Request r;
        r.prompt_tokens.assign(ids.begin() + begin, ids.begin() + end);
        r.params.max_tokens = 12;
        r.params.ignore_eos = true;
        r.params.temperature = 0.0f;
        r.params.logprobs = true;
        auto stream = s.engine().submit(r);
        EXPECT_TRUE(stream.ok()) << stream.message();
        if (!stream.ok()) return {};
        streams.push_back(std::move(stream).value());
    }
    Greedy out;
    for (auto& stream : streams) {
        std::vector<int32_t> tokens;
        std::vector<float> logprobs;
        engine::StreamChunk chunk;
        while (stream->read(chunk)) {
            for (const auto& d : chunk.choices) {
                tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
                for (const auto& lp : d.logprobs)
                    logprobs.push_back(lp.logprob);
                if (d.finish_reason != engine::FinishReason::kNone) {
                    EXPECT_EQ(d.finish_reason, engine::FinishReason::kLength) << d.finish_message;
                }
            }
        }
        out.tokens.push_back(std::move(tokens));
        out.logprobs.push_back(std::move(logprobs));
    }
    return out;
}

}  // namespace pagoda::executor
