// POST /v1/models/reload {"model": DIR, "served_model_name": NAME|[NAMES]}: swaps the served model without a restart.
// One reload at a time (a second one while it runs: 409). The reload runs on its own thread, since it waits for the
// old model's requests to finish, and answers when the old model is gone:
//   beside (the new model fits next to the old): load it while the old serves, install it, wait for the old one's
//     requests to finish, destroy it;
//   after drain: park new requests, wait for the old one's requests to finish, destroy it, load the new one, install
//     it (the parked requests run on it). If that load fails, the old directory is loaded again.
// A directory the loader's check refuses is a 400 and a load failure a 500; either way the old model serves on.
// With --enable-lora the new model serves the adapters the old one serves (ModelLoader::load); adapters cannot be
// loaded or unloaded while a reload runs (409).
#include <chrono>

#include "common/log.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

// The stand-in served while the old model drains and the new one loads (after drain only). Requests that need the
// model are parked meanwhile and never reach it; /metrics reads its empty stats.
class SwitchingGenerator final : public Generator {
  public:
    Result<std::shared_ptr<engine::RequestStream>> submit(engine::Request) override {
        return Status::error("the model is being reloaded; retry");
    }
    void cancel(engine::RequestId) override {}
    engine::EngineStats stats() override { return {}; }
};

SwitchingGenerator& switching_generator() {
    static SwitchingGenerator g;
    return g;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct ReloadJob {
    ServiceContext& ctx;
    Exchange x;
    std::string dir;
    std::vector<std::string> names;  // empty: keep the served names

    // Each run ends in exactly one of these two. The reload counts as over before its answer goes out, so that a
    // client that sends the next reload as soon as it has this answer is not told one is in progress (the next
    // reload joins this thread before it starts, and this thread does nothing after posting the answer).
    void answer(int status, std::string body) {
        ctx.reloading.store(false);
        auto r = x.responder;
        r->post([r, status, body = std::move(body), headers = x.headers]() mutable {
            send_json(r, status, std::move(body), std::move(headers));
        });
    }
    void fail(const ApiError& e) {
        ctx.reloads_failed.fetch_add(1);
        PAGODA_LOG_ERROR("model reload of " + dir + " failed: " + e.message);
        ctx.reloading.store(false);
        auto r = x.responder;
        r->post([r, e, headers = x.headers]() mutable { send_error(r, e, std::move(headers)); });
    }
    // Names, context length: the new model takes the served names unless the request gave others.
    void install(std::shared_ptr<ServedModel> model, const std::vector<std::string>& served_names,
                 std::shared_ptr<ServedModel>* replaced) {
        model->served_model_names = served_names;
        model->model_dir = model->model_dir.empty() ? dir : model->model_dir;
        ctx.max_model_len.store(model->max_model_len.load());
        ctx.metrics.set_max_model_len(model->max_model_len.load());
        auto old = ctx.models.install(std::move(model));
        if (replaced) *replaced = std::move(old);
    }

    void run();
    bool load_after_drain(const ModelLoader::Serving& serving, double& drain_s, std::string& error);
};

void ReloadJob::run() {
    const auto start = std::chrono::steady_clock::now();
    std::shared_ptr<const ServedModel> old = ctx.models.current();
    ModelLoader::Serving serving;
    serving.names = names.empty() ? old->served_model_names : names;
    {
        std::lock_guard<std::mutex> admin(ctx.lora_admin);  // a load or unload that began before `reloading` ends
        if (old->lora != nullptr) serving.adapters = old->lora->list();
    }
    for (const engine::LoraInfo& a : serving.adapters) {
        for (const std::string& name : serving.names) {
            if (a.name == name) {
                return fail(ApiError::bad_request(
                    "'" + name + "' is the name of a served LoRA adapter; unload it or serve the model as another name",
                    "served_model_name"));
            }
        }
    }
    if (Status s = ctx.loader->check(dir, serving); !s.ok()) return fail(ApiError::bad_request(s.message(), "model"));
    const std::string old_dir = old->model_dir;
    const std::vector<std::string>& served_names = serving.names;
    const bool beside = ctx.loader->fits_beside(dir);
    PAGODA_LOG_INFO("model reload: loading " + dir + (beside ? " beside " : " after draining ") + old_dir);
    old.reset();  // our reference would keep it from draining
    double drain_s = 0.0;
    if (beside) {
        auto loaded = ctx.loader->load(dir, serving);
        if (!loaded.ok())
            return fail(ApiError{500, "loading " + dir + " failed: " + loaded.message() + "; still serving " + old_dir,
                                 "InternalServerError", "model"});
        std::shared_ptr<ServedModel> replaced;
        install(std::move(loaded).value(), served_names, &replaced);
        drain_s = retire_when_drained(std::move(replaced));
    } else {
        std::string error;
        if (!load_after_drain(serving, drain_s, error))
            return fail(ApiError{500, error, "InternalServerError", "model"});
    }
    ctx.reloads_ok.fetch_add(1);
    const std::shared_ptr<const ServedModel> now = ctx.models.current();
    PAGODA_LOG_INFO("model reload: serving " + dir + " as \"" + now->served_model_names.front() + "\" (" +
                    (beside ? "loaded beside" : "loaded after drain") + ", old model drained in " +
                    std::to_string(drain_s) + " s)");
    Json body = Json::object();
    body.set("model", Json(now->served_model_names.front()));
    body.set("path", Json(now->model_dir));
    body.set("loaded_at", Json(now->loaded_at));
    body.set("strategy", Json(beside ? "beside" : "after_drain"));
    body.set("drain_seconds", Json(drain_s));
    body.set("seconds", Json(seconds_since(start)));
    answer(200, body.dump());
}

// The old model goes first: a stand-in holds its place (its tokenizer and template answer /tokenize meanwhile) while
// requests that need the model are parked. False, with `error`, when the new model did not load: the old directory
// is then loaded again; if even that fails, /health answers 503 and the parked requests are refused.
bool ReloadJob::load_after_drain(const ModelLoader::Serving& serving, double& drain_s, std::string& error) {
    ctx.models.pause();
    std::shared_ptr<ServedModel> old;
    {
        std::shared_ptr<const ServedModel> cur = ctx.models.current();
        auto stand_in = std::make_shared<ServedModel>(cur->tokenizer, cur->chat_template, switching_generator());
        stand_in->served_model_names = cur->served_model_names;
        stand_in->model_dir = cur->model_dir;
        stand_in->max_model_len.store(cur->max_model_len.load());
        old = ctx.models.install(std::move(stand_in), /*resume=*/false);
    }
    const std::string old_dir = old->model_dir;
    const ModelLoader::Serving before{serving.adapters, old->served_model_names};
    drain_s = retire_when_drained(std::move(old));
    auto loaded = ctx.loader->load(dir, serving);
    if (loaded.ok()) {
        install(std::move(loaded).value(), serving.names, nullptr);
        return true;
    }
    error = "loading " + dir + " failed: " + loaded.message();
    PAGODA_LOG_ERROR("model reload: " + error + "; loading " + old_dir + " again");
    auto again = ctx.loader->load(old_dir, before);
    if (!again.ok() && !before.adapters.empty()) {
        // An adapter's files that went away since it was loaded: the old model without adapters beats no model.
        PAGODA_LOG_ERROR("model reload: loading " + old_dir + " again failed (" + again.message() +
                         "); loading it without its LoRA adapters");
        again = ctx.loader->load(old_dir, ModelLoader::Serving{{}, before.names});
        if (again.ok()) error += "; the old model's LoRA adapters could not be loaded again and are no longer served";
    }
    if (!again.ok()) {
        // Nothing to serve: /health answers 503 so that a supervisor or load balancer acts.
        error += "; loading " + old_dir + " again failed too: " + again.message() + "; no model is served";
        ctx.ready.store(false);
        ctx.models.resume();
        return false;
    }
    install(std::move(again).value(), before.names, nullptr);
    error += "; still serving " + old_dir;
    return false;
}

// "served_model_name": a string or a list of strings; absent: keep the served names.
std::optional<ApiError> parse_names(const Json& body, std::vector<std::string>& names) {
    const Json* v = body.find("served_model_name");
    if (!v || v->is_null()) return std::nullopt;
    if (v->is_string() && !v->as_string().empty()) {
        names.push_back(v->as_string());
        return std::nullopt;
    }
    if (v->is_array() && !v->as_array().empty()) {
        for (const Json& n : v->as_array()) {
            if (!n.is_string() || n.as_string().empty()) break;
            names.push_back(n.as_string());
        }
        if (names.size() == v->as_array().size()) return std::nullopt;
    }
    return ApiError::bad_request("'served_model_name' must be a non-empty string or list of strings",
                                 "served_model_name");
}

}  // namespace

void handle_reload_model(ServiceContext& ctx, Exchange x) {
    auto body = parse_json_body(x);
    if (!body) return;
    const Json* model = body->find("model");
    if (!model || !model->is_string() || model->as_string().empty())
        return send_error(x, ApiError::bad_request("'model' must name a model directory", "model"));
    std::vector<std::string> names;
    if (auto err = parse_names(*body, names)) return send_error(x, *err);
    if (!ctx.loader || !ctx.loader->unavailable.empty())
        return send_error(x, ApiError::bad_request("model reload is not available: " +
                                                   (ctx.loader ? ctx.loader->unavailable : std::string("no loader"))));
    bool idle = false;
    if (!ctx.reloading.compare_exchange_strong(idle, true))
        return send_error(
            x, ApiError{409, "a model reload is already in progress; retry once it has answered", "ConflictError", ""});
    if (ctx.reload_thread.joinable()) ctx.reload_thread.join();  // the previous one, finished
    x.model.reset();  // the reload's own request must not hold the model it replaces
    ctx.reload_thread = std::thread(
        [job = ReloadJob{ctx, std::move(x), model->as_string(), std::move(names)}]() mutable { job.run(); });
}

}  // namespace pagoda::server::openai
