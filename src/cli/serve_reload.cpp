// Loading a model directory for `pagoda serve`, at start and on a hot reload (see serve_reload.h).
#include "cli/serve_reload.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/serve_task.h"
#include "common/file.h"
#include "common/log.h"
#include "model/model_spec.h"
#include "model/quantization.h"
#include "runtime/cuda_backend.h"
#include "server/openai/generator.h"

namespace pagoda::cli {

namespace fs = std::filesystem;

namespace {

// --chat-template (a file, or the template's text), else the model's own (none: a warning).
Result<std::unique_ptr<chat::ChatTemplate>> load_chat_template(const std::string& model_dir,
                                                               const std::optional<std::string>& flag,
                                                               const Json& tokenizer_config) {
    if (flag) {
        std::string text = *flag;
        if (text.find("{%") == std::string::npos && text.find("{{") == std::string::npos) {
            auto file = read_file(text);
            if (!file.ok()) return file.status().with_context("--chat-template");
            text = std::move(file).value();
        }
        auto t = chat::ChatTemplate::from_string(text, tokenizer_config);
        if (!t.ok()) return t.status().with_context("--chat-template");
        return std::make_unique<chat::ChatTemplate>(std::move(t).value());
    }
    auto t = chat::ChatTemplate::from_model_dir(model_dir);
    if (t.ok()) return std::make_unique<chat::ChatTemplate>(std::move(t).value());
    std::fprintf(stderr, "pagoda serve: warning: no chat template (%s); /v1/chat/completions needs one\n",
                 t.message().c_str());
    return std::unique_ptr<chat::ChatTemplate>();
}

// The bytes of the weight files (what the model needs in memory, before its KV cache).
uint64_t weight_bytes(const std::string& model_dir) {
    uint64_t total = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(model_dir, ec))
        if (e.path().extension() == ".safetensors") total += e.file_size(ec);
    return total;
}

// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
uint64_t available_memory_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    uint64_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return 0;
}

// Checks that find the mistakes a person makes when naming a directory, without loading weights: before a reload
// unloads anything. The adapters it is to serve are read again from their directories, which must still be there.
Status check_model_dir(const std::string& dir, const executor::EngineOptions& options, server::openai::ModelTask task,
                       const server::openai::ModelLoader::Serving& serving) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return Status::error(dir + " is not a directory");
    auto spec = model::load_model_spec(dir + "/config.json");
    if (!spec.ok()) return spec.status().with_context(dir);
    if (!options.quantization.empty()) {
        if (Status s = model::plan_quantization(spec->quantization, options.quantization).status(); !s.ok())
            return s.with_context(dir);
    }
    if (weight_bytes(dir) == 0) return Status::error(dir + " holds no .safetensors weights");
    auto tokenizer = Tokenizer::load_from_dir(dir);
    if (!tokenizer.ok()) return tokenizer.status().with_context(dir);
    if (Status s = pooling_settings(task, *tokenizer, dir).status(); !s.ok()) return s.with_context(dir);
    for (const engine::LoraInfo& a : serving.adapters) {
        if (!file_exists(a.path + "/adapter_config.json")) {
            return Status::error("LoRA adapter '" + a.name + "': " + a.path +
                                 "/adapter_config.json is gone (a reload reads the served adapters again; unload "
                                 "it first)");
        }
    }
    return ok_status();
}

// The engine and its generator, owned together by the ServedModel (the generator goes first).
struct OwnedEngine {
    std::unique_ptr<executor::ServingEngine> engine;
    std::unique_ptr<server::openai::EngineGenerator> generator;
};

}  // namespace

Result<ModelTextParts> load_model_text_parts(const std::string& model_dir,
                                             const std::optional<std::string>& chat_template_flag) {
    auto tokenizer = Tokenizer::load_from_dir(model_dir);
    if (!tokenizer.ok()) return tokenizer.status().with_context(model_dir);
    ModelTextParts parts{std::move(tokenizer).value(), Json(), nullptr};
    // tokenizer_config.json gives the special tokens (bos_token, eos_token, ...) templates may use; the model's own
    // template reads it itself, a --chat-template or a request's template gets it from here.
    if (const std::string path = model_dir + "/tokenizer_config.json"; std::ifstream(path).good()) {
        auto text = read_file(path);
        auto j = text.ok() ? Json::parse(*text) : Result<Json>(text.status());
        if (!j.ok()) return j.status().with_context(path);
        parts.tokenizer_config = std::move(j).value();
    }
    PAGODA_ASSIGN_OR_RETURN(parts.chat_template,
                            load_chat_template(model_dir, chat_template_flag, parts.tokenizer_config));
    return parts;
}

Result<std::shared_ptr<server::openai::ServedModel>> load_served_model(
    const std::string& model_dir, const std::optional<std::string>& chat_template_flag,
    const executor::EngineOptions& options, server::openai::ModelTask task) {
    PAGODA_ASSIGN_OR_RETURN(ModelTextParts parts, load_model_text_parts(model_dir, chat_template_flag));
    return start_served_model(model_dir, std::move(parts.tokenizer), std::move(parts.chat_template), options, task);
}

Result<std::shared_ptr<server::openai::ServedModel>> start_served_model(
    const std::string& model_dir, Tokenizer tokenizer, std::shared_ptr<const chat::ChatTemplate> chat_template,
    const executor::EngineOptions& options, server::openai::ModelTask task, std::string* summary) {
    PAGODA_ASSIGN_OR_RETURN(server::openai::PoolingSettings pooling, pooling_settings(task, tokenizer, model_dir));
    auto owned = std::make_shared<OwnedEngine>();
    PAGODA_ASSIGN_OR_RETURN(owned->engine, executor::create_engine(model_dir, options));
    owned->generator = std::make_unique<server::openai::EngineGenerator>(owned->engine->engine());
    const engine::EngineConfig& c = owned->engine->config();
    if (summary) {
        // As vLLM logs its GPU blocks: how many tokens the KV cache holds tells an operator what concurrency fits.
        *summary = "KV cache: " + std::to_string(c.num_kv_blocks) + " blocks of " + std::to_string(c.block_size) +
                   " tokens = " + std::to_string(static_cast<int64_t>(c.num_kv_blocks) * c.block_size) +
                   " tokens; max_model_len " + std::to_string(c.max_model_len) + ", max_num_seqs " +
                   std::to_string(c.max_num_seqs);
    }
    auto model = std::make_shared<server::openai::ServedModel>(std::move(tokenizer), std::move(chat_template),
                                                               *owned->generator);
    model->model_dir = model_dir;
    model->max_model_len.store(c.max_model_len);
    model->lora = owned->engine->lora();
    model->pooling = std::move(pooling);
    model->stop = [engine = owned->engine.get()] { engine->engine().shutdown(); };
    model->keep_alive = std::move(owned);
    return model;
}

void add_reload_flags(ArgParser& p) {
    p.add_option("reload-strategy", "auto|beside|drain",
                 "POST /v1/models/reload: load the new model beside the old one while it serves (beside), or after "
                 "the old one's requests finished (drain: new requests wait); auto (default): beside on the CPU when "
                 "the weights fit in half the available memory, drain on a GPU");
}

Result<ReloadStrategy> reload_strategy_from(const ArgParser& p) {
    const std::string v = p.get("reload-strategy").value_or("auto");
    if (v == "auto") return ReloadStrategy::kAuto;
    if (v == "beside") return ReloadStrategy::kBeside;
    if (v == "drain") return ReloadStrategy::kAfterDrain;
    return Status::error("--reload-strategy: '" + v + "' is not auto, beside or drain");
}

server::openai::ModelLoader make_model_loader(executor::EngineOptions options, server::openai::ModelTask task,
                                              std::optional<std::string> chat_template_flag, ReloadStrategy strategy,
                                              std::string unavailable, int test_delay_ms) {
    server::openai::ModelLoader loader;
    loader.unavailable = std::move(unavailable);
    using Serving = server::openai::ModelLoader::Serving;
    loader.check = [options, task](const std::string& dir, const Serving& serving) {
        return check_model_dir(dir, options, task, serving);
    };
    loader.load = [options, task, chat_template_flag, test_delay_ms](
                      const std::string& dir,
                      const Serving& serving) -> Result<std::shared_ptr<server::openai::ServedModel>> {
        if (test_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(test_delay_ms));
        if (!options.enable_lora) return load_served_model(dir, chat_template_flag, options, task);
        // What the old model serves now: --lora-modules, less those unloaded, plus those loaded over HTTP; no adapter
        // may take a name the model is served under.
        executor::EngineOptions with_adapters = options;
        with_adapters.lora_modules.clear();
        for (const engine::LoraInfo& a : serving.adapters)
            with_adapters.lora_modules.emplace_back(a.name, a.path);
        with_adapters.lora_reserved_names = serving.names;
        auto loaded = load_served_model(dir, chat_template_flag, with_adapters, task);
        if (!loaded.ok() && !serving.adapters.empty()) {
            return Status::error(loaded.message() + " (a reload serves the LoRA adapters the old model serves)");
        }
        return loaded;
    };
    const bool on_cpu = options.device == "cpu" || (options.device == "auto" && cuda_device_count() == 0);
    loader.fits_beside = [strategy, on_cpu](const std::string& dir) {
        if (strategy != ReloadStrategy::kAuto) return strategy == ReloadStrategy::kBeside;
        // A GPU's memory is taken by the served model's KV cache (--gpu-memory-utilization): a second model does not
        // fit beside it. On the CPU the weights are mapped files and the KV cache is small.
        return on_cpu && weight_bytes(dir) < available_memory_bytes() / 2;
    };
    return loader;
}

}  // namespace pagoda::cli
