// Generator: what the HTTP handlers need from an inference backend — submit a tokenized prompt with sampling
// parameters and read token-id events from a bounded stream; cancel. The engine is the real one (EngineGenerator);
// tests and the hidden --test-generator flag use ScriptedGenerator, which needs no model.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "engine/request.h"

namespace pagoda::server::openai {

class Generator {
  public:
    virtual ~Generator() = default;
    // Any thread. An error is a problem with the request (the message says what), answered with 400.
    // The stream's notifier may be set right after; output produced before that is still read by try_read().
    virtual Result<std::shared_ptr<engine::RequestStream>> submit(engine::Request request) = 0;
    // Any thread; unknown or finished ids are ignored.
    virtual void cancel(engine::RequestId id) = 0;
    // Any thread, without waiting for a step: queue and cache gauges for /metrics.
    virtual engine::EngineStats stats() = 0;
    // Blocks until the engine thread has been between two steps: the liveness probes' proof of life (systemd's
    // watchdog, /health). What has no engine thread returns at once.
    virtual void wait_for_turn() {}
};

// Adapts an engine::Engine (which must outlive it).
class EngineGenerator final : public Generator {
  public:
    explicit EngineGenerator(engine::Engine& engine) : engine_(engine) {}
    Result<std::shared_ptr<engine::RequestStream>> submit(engine::Request request) override;
    void cancel(engine::RequestId id) override;
    engine::EngineStats stats() override;
    void wait_for_turn() override;

  private:
    engine::Engine& engine_;
};

// Forwards to a generator set later (the server listens, and answers /health with 503, while the model loads).
class DeferredGenerator final : public Generator {
  public:
    void set(Generator* target) { target_.store(target); }
    Result<std::shared_ptr<engine::RequestStream>> submit(engine::Request request) override {
        Generator* t = target_.load();
        if (!t) return Status::error("the model is still loading");
        return t->submit(std::move(request));
    }
    void cancel(engine::RequestId id) override {
        if (Generator* t = target_.load()) t->cancel(id);
    }
    engine::EngineStats stats() override {
        Generator* t = target_.load();
        return t ? t->stats() : engine::EngineStats{};
    }
    void wait_for_turn() override {
        if (Generator* t = target_.load()) t->wait_for_turn();
    }

  private:
    std::atomic<Generator*> target_{nullptr};
};

// A test double, never a model: every request "generates" the same scripted token ids (cut at max_tokens, at an
// EOS or stop id unless ignore_eos), one token per `token_interval_us`, on its own thread. With n > 1 every choice
// gets the script. Usage counts the prompt and the emitted tokens; cached_tokens stays 0.
// An agent's loop needs a second answer (a call, then text once the tool answered): with `later_scripts`, a prompt
// holding the `turn_marker` k times (the generation prompt is one) gets script k - 1, the last one beyond.
class ScriptedGenerator final : public Generator {
  public:
    struct Options {
        std::vector<int32_t> script;
        std::vector<std::vector<int32_t>> later_scripts;
        std::vector<int32_t> turn_marker;  // e.g. the tokens of "<|im_start|>assistant"
        std::vector<int32_t> eos_token_ids;
        int32_t max_model_len = 4096;
        int token_interval_us = 0;
    };
    explicit ScriptedGenerator(Options options);
    ~ScriptedGenerator() override;
    Result<std::shared_ptr<engine::RequestStream>> submit(engine::Request request) override;
    void cancel(engine::RequestId id) override;
    engine::EngineStats stats() override;  // running = scripts in progress; no KV cache

    struct Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::server::openai
