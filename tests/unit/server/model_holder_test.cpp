// ModelHolder, the seam of model hot reload: requests keep the model they started on, a paused holder parks requests
// until the next model is installed, and a replaced model is destroyed only once nobody holds it.
#include "server/openai/model_holder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace pagoda::server::openai {
namespace {

// A generator that is never asked to generate here; a ServedModel needs one.
class IdleGenerator final : public Generator {
  public:
    Result<std::shared_ptr<engine::RequestStream>> submit(engine::Request) override { return Status::error("idle"); }
    void cancel(engine::RequestId) override {}
    engine::EngineStats stats() override { return {}; }
};

// A served model whose destruction is seen through `destroyed`.
std::shared_ptr<ServedModel> model_named(const std::string& name, Generator& g, std::atomic<int>* destroyed) {
    static const Tokenizer tokenizer = *Tokenizer::from_vocab_and_merges(R"({"a": 0, "b": 1})", "", "");
    auto m = std::make_shared<ServedModel>(tokenizer, nullptr, g);
    m->served_model_names = {name};
    if (destroyed) m->keep_alive = std::shared_ptr<void>(nullptr, [destroyed](void*) { destroyed->fetch_add(1); });
    return m;
}

TEST(ModelHolder, RequestsKeepTheModelTheyStartedOn) {
    IdleGenerator g;
    ModelHolder holder;
    std::atomic<int> destroyed{0};
    EXPECT_EQ(holder.install(model_named("a", g, &destroyed)), nullptr);
    const auto pinned = holder.current();  // a request in flight on "a"
    auto old = holder.install(model_named("b", g, nullptr));
    EXPECT_EQ(holder.current()->served_model_names.front(), "b");
    EXPECT_EQ(pinned->served_model_names.front(), "a");
    EXPECT_GT(holder.current()->loaded_at, 0);

    // The reloader waits for the request to let go before it destroys "a".
    auto retired = std::async(std::launch::async,
                              [old = std::move(old)]() mutable { return retire_when_drained(std::move(old)); });
    EXPECT_EQ(retired.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
    EXPECT_EQ(destroyed.load(), 0);
    const_cast<std::shared_ptr<const ServedModel>&>(pinned).reset();  // the request's answer is done
    EXPECT_GE(retired.get(), 0.0);
    EXPECT_EQ(destroyed.load(), 1);
}

TEST(ModelHolder, PausedRequestsRunOnTheNextModel) {
    IdleGenerator g;
    ModelHolder holder;
    holder.install(model_named("a", g, nullptr));
    std::vector<std::string> ran;
    holder.run_when_serving([&] { ran.push_back(holder.current()->served_model_names.front()); });
    EXPECT_EQ(ran, std::vector<std::string>{"a"});  // not paused: at once

    holder.pause();
    EXPECT_TRUE(holder.paused());
    holder.run_when_serving([&] { ran.push_back(holder.current()->served_model_names.front()); });
    holder.run_when_serving([&] { ran.push_back(holder.current()->served_model_names.front()); });
    EXPECT_EQ(holder.parked(), 2u);
    // A stand-in installed without resuming keeps them parked (the old model drains meanwhile).
    holder.install(model_named("stand-in", g, nullptr), /*resume=*/false);
    EXPECT_EQ(holder.parked(), 2u);
    holder.install(model_named("b", g, nullptr));
    EXPECT_FALSE(holder.paused());
    EXPECT_EQ(holder.parked(), 0u);
    EXPECT_EQ(holder.parked_total(), 2u);  // the counter keeps them (the metric a short switch's samples may miss)
    EXPECT_EQ(ran, (std::vector<std::string>{"a", "b", "b"}));

    // A pause ended without a new model (the reload failed twice) runs them on what is there.
    holder.pause();
    holder.run_when_serving([&] { ran.push_back(holder.current()->served_model_names.front()); });
    holder.resume();
    EXPECT_EQ(ran.back(), "b");
}

}  // namespace
}  // namespace pagoda::server::openai
