// `pagoda serve MODEL_DIR [flags]`: the OpenAI-compatible HTTP server. Flag names follow vLLM's where the concept is
// the same; vLLM flags that do not apply are accepted with a warning when harmless and refused with a reason when
// ignoring them would change what the user gets.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "chat/chat_template.h"
#include "chat/output/tool_parser.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/serve_lora_flags.h"
#include "cli/serve_ops.h"
#include "cli/serve_reload.h"
#include "cli/serve_task.h"
#include "common/json.h"
#include "common/log.h"
#include "dist/tcp_channel.h"
#include "engine/engine.h"
#include "executor/create_engine.h"
#include "executor/tensor_parallel_worker.h"
#include "model/dummy_checkpoint.h"
#include "model/model_spec.h"
#include "model/quantization.h"
#include "runtime/cuda_backend.h"
#include "server/http/http_server.h"
#include "server/openai/generator.h"
#include "server/openai/service.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace pagoda;
namespace http = pagoda::server::http;

constexpr std::string_view kCmd = "serve";

// vLLM flags with no meaning here that change nothing a client sees: accepted, with a warning.
struct ForeignFlag {
    std::string_view name;
    bool takes_value;
    std::string_view why;
};
const ForeignFlag kHarmless[] = {
    {"trust-remote-code", false, "Qwen architectures are built in"},
    {"disable-log-requests", false, "requests are not logged by default"},
    {"enable-log-requests", false, "request logging is not implemented yet"},
    {"disable-log-stats", false, "no periodic stats log yet"},
    {"uvicorn-log-level", true, "there is no uvicorn"},
    {"download-dir", true, "pagoda loads local directories only"},
    {"revision", true, "pagoda loads local directories only"},
    {"tokenizer-mode", true, "one tokenizer implementation"},
    {"enable-chunked-prefill", false, "chunked prefill is always on"},
    {"no-enable-chunked-prefill", false, "chunked prefill is always on"},
    {"enable-prompt-tokens-details", false, "usage.prompt_tokens_details is always sent"},
    {"enable-request-id-headers", false, "X-Request-Id is always echoed"},
    {"enable-server-load-tracking", false, "not implemented yet"},
    {"max-logprobs", true, "the limit is 20"},
    {"swap-space", true, "no CPU swap space"},
    {"cpu-offload-gb", true, "no offloading"},
    {"disable-custom-all-reduce", false, "single device"},
    {"distributed-executor-backend", true, "one process per node, its ranks as threads"},
    {"otlp-traces-endpoint", true, "no tracing yet"},
    {"collect-detailed-traces", true, "no tracing yet"},
    {"speculative-config", true, "no speculative decoding yet (output is the same, only slower)"},
    {"compilation-config", true, "no compilation"},
    {"api-server-count", true, "one API server"},
    {"max-num-partial-prefills", true, "not applicable"},
    {"chat-template-content-format", true, "text parts are joined into a string"},
    {"structured-outputs-config", true, "pagoda's own grammar engine serves structured output (no backend to choose)"},
    {"response-role", true, "the role is always assistant"},
};
// Flags whose request cannot be honoured; ignoring them would silently give something else.
struct RefusedFlag {
    std::string_view name;
    bool takes_value;
    std::string_view ok_value;  // a value that is fine (e.g. "1" for parallel sizes); empty: always refused
    std::string_view why;
};
const RefusedFlag kRefused[] = {
    {"pipeline-parallel-size", true, "1", "pipeline parallelism is not implemented"},
    {"data-parallel-size", true, "1", "data parallelism is not implemented"},
    {"enable-sleep-mode", false, "", "sleep mode is not supported"},
    {"tokenizer", true, "", "the tokenizer is read from MODEL_DIR; a separate tokenizer is not supported yet"},
    {"pooler-config", true, "",
     "pooling follows the model directory (sentence-transformers' Pooling module) or --task embed|score; "
     "--pooler-config is not read"},
};

std::string short_alias(std::string_view a) {
    if (a == "-tp") return "--tensor-parallel-size";
    if (a == "-pp") return "--pipeline-parallel-size";
    if (a == "-dp") return "--data-parallel-size";
    if (a == "-q") return "--quantization";
    return std::string(a);
}

// Removes the foreign vLLM flags from `args` (warning or refusing), so the rest can go to the ArgParser.
Status filter_foreign_flags(std::span<const std::string_view> args, std::vector<std::string>& kept) {
    for (size_t i = 0; i < args.size(); ++i) {
        std::string arg = short_alias(args[i]);
        if (arg.rfind("--", 0) != 0) {
            kept.push_back(arg);
            continue;
        }
        std::string name = arg.substr(2);
        std::optional<std::string> value;
        if (auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name.resize(eq);
        }
        std::replace(name.begin(), name.end(), '_', '-');  // vLLM accepts both spellings
        bool handled = false;
        for (const auto& r : kRefused) {
            if (r.name != name) continue;
            handled = true;
            if (r.takes_value && !value) {
                if (i + 1 >= args.size()) return Status::error("--" + name + " needs a value");
                value = std::string(args[++i]);
            }
            if (r.ok_value.empty() || !value || *value != r.ok_value) {
                return Status::error("--" + name + (value ? " " + *value : "") + ": " + std::string(r.why));
            }
        }
        for (const auto& h : kHarmless) {
            if (handled || h.name != name) continue;
            handled = true;
            if (h.takes_value && !value && i + 1 < args.size()) ++i;
            std::fprintf(stderr, "pagoda serve: warning: ignoring vLLM flag --%s (%s)\n", name.c_str(),
                         std::string(h.why).c_str());
        }
        if (!handled) kept.push_back("--" + name + (value ? "=" + *value : ""));
    }
    return ok_status();
}

Result<int64_t> parse_int(std::string_view flag, const std::string& text, int64_t lo, int64_t hi) {
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < lo || v > hi) {
        return Status::error("--" + std::string(flag) + ": '" + text + "' is not an integer in [" + std::to_string(lo) +
                             ", " + std::to_string(hi) + "]");
    }
    return static_cast<int64_t>(v);
}

// vLLM takes lists as JSON ('["*"]'); a plain comma-separated list is accepted too.
Result<std::vector<std::string>> parse_list(std::string_view flag, const std::string& text) {
    std::vector<std::string> out;
    if (!text.empty() && text[0] == '[') {
        auto j = Json::parse(text);
        if (!j.ok() || !j->is_array()) return Status::error("--" + std::string(flag) + ": not a JSON list: " + text);
        for (const Json& v : j->as_array()) {
            if (!v.is_string()) return Status::error("--" + std::string(flag) + ": list items must be strings");
            out.push_back(v.as_string());
        }
        return out;
    }
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

Result<std::string> read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::error("cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// --config FILE: a JSON object of flag -> value ({"port": 8001, "served-model-name": ["a", "b"],
// "enable-auto-tool-choice": true}); its flags come before the command line's, so the command line wins.
Status expand_config_file(std::span<const std::string_view> args, std::vector<std::string>& out) {
    std::vector<std::string> rest;
    std::optional<std::string> path;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--config" && i + 1 < args.size()) {
            path = std::string(args[++i]);
        } else if (args[i].rfind("--config=", 0) == 0) {
            path = std::string(args[i].substr(9));
        } else {
            rest.emplace_back(args[i]);
        }
    }
    if (path) {
        auto text = read_text_file(*path);
        if (!text.ok()) return text.status().with_context("--config");
        auto j = Json::parse(*text);
        if (!j.ok()) return j.status().with_context("--config " + *path);
        if (!j->is_object()) return Status::error("--config " + *path + ": must hold a JSON object of flag: value");
        for (const auto& entry : j->as_object()) {
            // (Named, not a structured binding: the lambda below captures it, which C++20 allows and clang 14 does
            // not.)
            const std::string& key = entry.first;
            const Json& value = entry.second;
            std::string flag = "--" + key;
            std::replace(flag.begin(), flag.end(), '_', '-');
            auto scalar = [&](const Json& v) -> Result<std::string> {
                if (v.is_string()) return v.as_string();
                if (v.is_int()) return std::to_string(v.as_int());
                if (v.is_float()) return Json(v.as_double()).dump();
                if (v.is_object()) return v.dump();  // e.g. default-chat-template-kwargs
                return Status::error("--config " + *path + ": '" + key + "' has an unsupported value");
            };
            if (value.is_bool()) {
                if (value.as_bool()) out.push_back(flag);
            } else if (value.is_array()) {
                for (const Json& v : value.as_array()) {
                    PAGODA_ASSIGN_OR_RETURN(std::string s, scalar(v));
                    out.push_back(flag + "=" + s);
                }
            } else {
                PAGODA_ASSIGN_OR_RETURN(std::string s, scalar(value));
                out.push_back(flag + "=" + s);
            }
        }
    }
    out.insert(out.end(), rest.begin(), rest.end());
    return ok_status();
}

// --nnodes, --node-rank (or the launcher's variable), --dist-init-addr, --dist-timeout, checked.
struct NodeFlags {
    int32_t nnodes = 1;
    int32_t node_rank = 0;
    std::string dist_init_addr;
    int32_t dist_timeout_s = 300;
};

Result<NodeFlags> parse_node_flags(const cli::ArgParser& p) {
    NodeFlags f;
    if (auto v = p.get("nnodes")) {
        PAGODA_ASSIGN_OR_RETURN(const int64_t n, parse_int("nnodes", *v, 1, 4096));
        f.nnodes = static_cast<int32_t>(n);
    }
    if (auto v = p.get("node-rank")) {
        PAGODA_ASSIGN_OR_RETURN(const int64_t r, parse_int("node-rank", *v, 0, 4095));
        f.node_rank = static_cast<int32_t>(r);
    } else if (f.nnodes > 1) {
        // The launchers' own numbering: mpirun's process rank, or the LeaderWorkerSet pod's index.
        for (const char* env : {"OMPI_COMM_WORLD_RANK", "LWS_WORKER_INDEX"}) {
            const char* value = std::getenv(env);
            if (value == nullptr || *value == '\0') continue;
            auto r = parse_int("node-rank", value, 0, 4095);
            if (!r.ok()) return Status::error("$" + std::string(env) + "='" + value + "' is not a node rank");
            f.node_rank = static_cast<int32_t>(*r);
            break;
        }
    }
    if (f.node_rank >= f.nnodes) {
        return Status::error("--node-rank " + std::to_string(f.node_rank) + " is outside 0.." +
                             std::to_string(f.nnodes - 1) + " (--nnodes " + std::to_string(f.nnodes) + ")");
    }
    if (auto v = p.get("dist-init-addr")) {
        if (Status s = parse_host_port(*v).status(); !s.ok()) return s.with_context("--dist-init-addr");
        f.dist_init_addr = *v;
    } else if (f.nnodes > 1) {
        return Status::error("--nnodes " + std::to_string(f.nnodes) +
                             " needs --dist-init-addr HOST:PORT (node 0's address and a port it can listen on)");
    }
    if (auto v = p.get("dist-timeout")) {
        PAGODA_ASSIGN_OR_RETURN(const int64_t t, parse_int("dist-timeout", *v, 1, 86400));
        f.dist_timeout_s = static_cast<int32_t>(t);
    }
    return f;
}

// The engine's options from the flags (node 0 and a single process load with them; other nodes use the device,
// thread and parallelism ones, and node 0's sizes).
Result<executor::EngineOptions> engine_options(const cli::ArgParser& p, const std::string& device,
                                               double gpu_memory_utilization, const NodeFlags& nodes) {
    executor::EngineOptions eo;
    auto int_flag = [&](const char* flag, int64_t lo, int64_t hi, int32_t& out) -> Status {
        if (auto v = p.get(flag)) {
            PAGODA_ASSIGN_OR_RETURN(int64_t n, parse_int(flag, *v, lo, hi));
            out = static_cast<int32_t>(n);
        }
        return ok_status();
    };
    int32_t threads = 0;
    for (Status s :
         {int_flag("max-model-len", 2, 1 << 24, eo.max_model_len), int_flag("max-num-seqs", 1, 65536, eo.max_num_seqs),
          int_flag("max-num-batched-tokens", 1, 1 << 24, eo.max_num_batched_tokens),
          int_flag("num-gpu-blocks-override", 1, 1 << 24, eo.num_kv_blocks),
          int_flag("block-size", 1, 1024, eo.block_size), int_flag("threads", 0, 4096, threads),
          int_flag("tensor-parallel-size", 1, 1024, eo.tensor_parallel_size)}) {
        PAGODA_RETURN_IF_ERROR(s);
    }
    eo.num_threads = threads;
    eo.device = device;
    eo.gpu_memory_utilization = gpu_memory_utilization;
    eo.enable_prefix_caching = !p.has("no-enable-prefix-caching");
    eo.enforce_eager = p.has("enforce-eager");
    eo.async_scheduling = p.has("async-scheduling") && !p.has("no-async-scheduling");
    eo.enable_expert_parallel = p.has("enable-expert-parallel");
    eo.quantization = p.get("quantization").value_or("");
    if (auto v = p.get("kv-cache-dtype")) {
        PAGODA_ASSIGN_OR_RETURN(eo.kv_cache_dtype, parse_kv_cache_dtype(*v));
    }
    eo.calculate_kv_scales = p.has("calculate-kv-scales");
    eo.fp8_activations = p.has("fp8-activations");
    if (auto v = p.get("load-format")) {
        PAGODA_ASSIGN_OR_RETURN(eo.dummy_weights, model::parse_load_format(*v));
    }
    if (auto v = p.get("scheduling-policy")) {
        if (*v != "fcfs" && *v != "priority") return Status::error("--scheduling-policy: fcfs or priority");
        eo.priority_scheduling = *v == "priority";
    }
    if (auto v = p.get("seed")) {
        PAGODA_ASSIGN_OR_RETURN(const int64_t seed, parse_int("seed", *v, INT64_MIN, INT64_MAX));
        eo.seed = static_cast<uint64_t>(seed);
    }
    eo.nnodes = nodes.nnodes;
    eo.node_rank = nodes.node_rank;
    eo.dist_init_addr = nodes.dist_init_addr;
    eo.dist_timeout_s = nodes.dist_timeout_s;
    return eo;
}

// --- flags -> ServeOptions ----------------------------------------------------------------------------------

// The hidden test double, kept out of --help: --x-test-generator-text TEXT makes every request "generate" the tokens
// of TEXT (no weights are loaded); --x-test-token-interval-us N paces them. Given again, the flag adds the answer of
// the next assistant turn (an agent's loop: a call, then text once the tool answered).
struct TestGeneratorFlags {
    std::vector<std::string> texts;
    int token_interval_us = 0;
};
// Hidden too: --x-test-reload-delay-ms N makes each model reload wait N ms before loading, as a large model's load
// takes seconds, so that the reload tests can remove the directory or send requests while it runs;
// --x-test-step-delay-ms N makes every engine step N ms longer (on the engine thread), an engine stuck in a step for
// the /health test.
struct TestHooks {
    int reload_delay_ms = 0;
    int step_delay_ms = 0;
};

// The step delay of --x-test-step-delay-ms: an observer that sleeps on the engine thread after each step.
class StepDelay final : public engine::StepObserver {
  public:
    explicit StepDelay(int ms) : ms_(ms) {}
    void on_step(const engine::StepInput&, const engine::EngineStats&) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    }

  private:
    int ms_;
};

// What `pagoda serve` was asked for, every flag parsed and checked before anything is loaded.
struct ServeOptions {
    std::string model_dir;
    http::ServerOptions http;
    // The service's configuration but for the tool parser, which "auto" takes from the chat template.
    server::openai::ServiceConfig service;
    std::optional<std::string> chat_template;     // --chat-template FILE|TEXT
    std::optional<std::string> tool_call_parser;  // --tool-call-parser NAME
    std::optional<TestGeneratorFlags> test_generator;
    int32_t test_max_model_len = 4096;  // the test generator's context
    TestHooks test_hooks;
    NodeFlags nodes;
    std::optional<executor::EngineOptions> engine;  // what loads the model (unset with the test generator)
    std::string api_keys_file;                      // --api-keys-file, re-read on SIGHUP
    cli::ReloadStrategy reload_strategy = cli::ReloadStrategy::kAuto;
};

// --config, vLLM's foreign flags and the hidden flags, resolved: what is left goes to the ArgParser.
Status preprocess_args(std::span<const std::string_view> cli_args, std::vector<std::string>& args,
                       std::optional<TestGeneratorFlags>& test_generator, TestHooks& hooks) {
    std::vector<std::string> expanded;
    PAGODA_RETURN_IF_ERROR(expand_config_file(cli_args, expanded));
    std::vector<std::string_view> raw_args(expanded.begin(), expanded.end());
    std::vector<std::string> kept;
    PAGODA_RETURN_IF_ERROR(filter_foreign_flags(raw_args, kept));
    kept = cli::split_lora_modules(std::move(kept));
    std::map<std::string, std::vector<std::string>> hidden;
    for (size_t i = 0; i < kept.size(); ++i) {
        const std::string& a = kept[i];
        bool taken = false;
        for (const char* name :
             {"x-test-generator-text", "x-test-token-interval-us", "x-test-reload-delay-ms", "x-test-step-delay-ms"}) {
            const std::string flag = std::string("--") + name;
            if (a == flag && i + 1 < kept.size()) {
                hidden[name].push_back(kept[++i]);
                taken = true;
            } else if (a.rfind(flag + "=", 0) == 0) {
                hidden[name].push_back(a.substr(flag.size() + 1));
                taken = true;
            }
        }
        if (!taken) args.push_back(a);
    }
    if (hidden.count("x-test-reload-delay-ms"))
        hooks.reload_delay_ms = std::atoi(hidden["x-test-reload-delay-ms"].back().c_str());
    if (hidden.count("x-test-step-delay-ms"))
        hooks.step_delay_ms = std::atoi(hidden["x-test-step-delay-ms"].back().c_str());
    if (hidden.count("x-test-generator-text")) {
        test_generator = TestGeneratorFlags{hidden["x-test-generator-text"], 0};
        if (hidden.count("x-test-token-interval-us"))
            test_generator->token_interval_us = std::atoi(hidden["x-test-token-interval-us"].back().c_str());
    }
    return ok_status();
}

cli::ArgParser make_serve_parser() {
    cli::ArgParser p(
        "pagoda serve MODEL_DIR [--host H] [--port P] [--served-model-name NAME ...] [flags]",
        "Serves the model in MODEL_DIR over an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions,\n"
        "/v1/models, /tokenize, /detokenize, /health, /ping, /version, /metrics; an embedding model /v1/embeddings,\n"
        "a reranker /v1/score and /v1/rerank: see --task). Flags follow vLLM's names; vLLM\n"
        "flags that do not apply are ignored with a warning when harmless and refused when they would change the\n"
        "results. SIGINT/SIGTERM: /health and new requests get 503, in-flight requests finish (up to\n"
        "--shutdown-timeout; a second signal stops waiting), exit 0. SIGHUP re-reads --api-keys-file and reopens\n"
        "--access-log. POST /v1/models/reload {\"model\": DIR} swaps the model without a restart (requests in\n"
        "flight finish on the old one). Under systemd (Type=notify) it sends READY=1, STOPPING=1 and WATCHDOG=1\n"
        "keep-alives.\n"
        "docs/serving.md and docs/operations.md have the details.\n"
        "--config FILE: a JSON object of the same flags ({\"port\": 8001, \"served-model-name\": [\"a\"]}); the\n"
        "command line overrides it.");
    p.add_positional("MODEL_DIR", "model directory (config.json, safetensors, tokenizer, chat template)", false);
    p.add_option("model", "DIR", "same as MODEL_DIR");
    p.add_option("host", "HOST", "address to listen on (default 127.0.0.1)");
    p.add_option("port", "PORT", "port (default 8000; 0 = any free port, printed at start)");
    p.add_option("served-model-name", "NAME", "model name(s) clients use (default: MODEL_DIR)", true);
    p.add_option("max-model-len", "N",
                 "context length: prompt + output tokens (default: the model's on a GPU, or what the KV cache holds "
                 "if less; at most 8192 on the CPU)");
    p.add_option("gpu-memory-utilization", "F", "fraction of device memory to use (GPU builds; ignored on CPU)");
    p.add_option("max-num-seqs", "N",
                 "sequences per step (default: 1024 on a GPU of 70 GiB or more, 256 below, fewer for hybrid models "
                 "whose states would not fit; 16 on the CPU)");
    p.add_option("max-num-batched-tokens", "N",
                 "tokens per step (default: 8192 on a GPU of 70 GiB or more, else 2048)");
    p.add_option("num-gpu-blocks-override", "N",
                 "number of KV-cache blocks (default: what 4 GiB holds on the CPU, what --gpu-memory-utilization "
                 "leaves on a GPU; at most max-num-seqs full sequences)");
    p.add_option("block-size", "N", "tokens per KV-cache block (default 16)");
    p.add_switch("enable-prefix-caching", "reuse KV blocks of shared prompt prefixes (default on)");
    p.add_switch("no-enable-prefix-caching", "turn prefix caching off");
    p.add_switch("enforce-eager", "CUDA: run decode steps eagerly instead of replaying recorded CUDA graphs");
    p.add_switch("async-scheduling",
                 "schedule step n+1 and hand out step n's tokens while the model runs step n (default off)");
    p.add_switch("no-async-scheduling", "turn async scheduling off (the default)");
    p.add_option("dtype", "DTYPE", "auto | float32 | float (CPU computes in float32)");
    p.add_option("quantization", "METHOD",
                 "-q: fp8 quantizes a bf16 checkpoint's projections and MoE experts at load (e4m3, per-channel "
                 "scales); a quantized "
                 "checkpoint's method (fp8, compressed-tensors, awq, gptq, auto-round) is read from config.json and, "
                 "if given, checked");
    p.add_option("kv-cache-dtype", "DTYPE",
                 "auto (bf16 on a GPU, f32 on the CPU) | bfloat16 | fp8 | fp8_e4m3: fp8 stores K and V as e4m3 with "
                 "a scale per layer (1.0 unless calculated), half a GPU's bytes per token: twice the tokens");
    p.add_switch("calculate-kv-scales",
                 "fp8 KV cache: each layer's K and V scales from the first prefill's amax / 448");
    p.add_switch("fp8-activations",
                 "fp8 checkpoints with dynamic activation scales (and -q fp8): round each token's projection inputs to "
                 "fp8 as the checkpoint computes them (W8A8; cuBLASLt's fp8 GEMM on Hopper); default weight-only");
    p.add_option("load-format", "FORMAT",
                 "auto | safetensors (the checkpoint, the default) | dummy: random bf16 weights for config.json alone "
                 "(speed measurements, no checkpoint read; the words mean nothing)");
    p.add_option("seed", "S", "seed for requests that bring none (default 0)");
    p.add_option("device", "DEV", cli::kDeviceHelp);
    p.add_option("api-key", "KEY", "require 'Authorization: Bearer KEY' on /v1 (also PAGODA_API_KEY, VLLM_API_KEY)",
                 true);
    p.add_option("allowed-origins", "LIST", "CORS origins, JSON list (default [\"*\"])");
    p.add_option("allowed-methods", "LIST", "CORS methods, JSON list (default [\"*\"])");
    p.add_option("allowed-headers", "LIST", "CORS headers, JSON list (default [\"*\"])");
    p.add_switch("allow-credentials", "CORS: allow credentials");
    p.add_option("chat-template", "FILE|TEXT", "chat template file (or the template text) instead of the model's");
    p.add_option("default-chat-template-kwargs", "JSON",
                 "defaults for chat_template_kwargs, e.g. '{\"enable_thinking\":false}'");
    p.add_switch("enable-auto-tool-choice", "let the model call tools on its own (tool_choice auto)");
    p.add_option("tool-call-parser", "NAME", "hermes | qwen3_coder | auto (from the chat template)");
    p.add_option("reasoning-parser", "NAME", "qwen3: split <think>...</think> into reasoning_content");
    p.add_option("generation-config", "auto|vllm|DIR",
                 "defaults of the sampling fields a request leaves unset (temperature, top_p, top_k, min_p, "
                 "repetition_penalty): the model's generation_config.json (auto), OpenAI's (vllm), or DIR's "
                 "generation_config.json");
    p.add_option("metrics-prefix", "PREFIX", "prefix of the /metrics names: pagoda (default) | vllm (vLLM dashboards)");
    p.add_option("scheduling-policy", "POLICY", "fcfs | priority");
    p.add_option("threads", "N", "CPU threads for the model (default: all cores)");
    cli::add_lora_flags(p);
    cli::add_task_flags(p);
    p.add_option("tensor-parallel-size", "N",
                 "split the model over N ranks, one thread each (-tp; on cuda: GPUs 0..N-1)");
    p.add_switch("enable-expert-parallel",
                 "MoE models with -tp N: each rank holds num_experts / N whole routed experts instead of a slice of "
                 "every expert (attention and the shared expert stay split by heads and features)");
    p.add_option("nnodes", "M",
                 "spread the N ranks over M processes, one per server, N / M each (default 1; on the CPU one rank "
                 "per node; docs/deployment-multinode.md)");
    p.add_option("node-rank", "R",
                 "this process's node, 0..M-1: node 0 serves HTTP and schedules, the others run its steps (default: "
                 "$OMPI_COMM_WORLD_RANK, else $LWS_WORKER_INDEX, else 0)");
    p.add_option("dist-init-addr", "HOST:PORT",
                 "where the nodes meet: node 0's address and a free port it listens on (needed with --nnodes > 1)");
    p.add_option("dist-timeout", "SECONDS",
                 "how long to wait for the other nodes to connect and for each node's answer to a step (default 300)");
    p.add_option("http-threads", "N", "HTTP I/O threads (default 2)");
    p.add_option("max-body-bytes", "N", "largest accepted request body (default 33554432)");
    p.add_option("http-read-timeout", "SECONDS", "time a client has to send one whole request (default 60)");
    p.add_option("shutdown-timeout", "SECONDS", "how long in-flight requests may finish after SIGTERM (default 30)");
    p.add_option("engine-stall-timeout", "SECONDS",
                 "/health answers 503 once the engine has been inside one step this long: a wedged engine fails "
                 "liveness probes (default 300; 0: never)");
    cli::add_serve_ops_flags(p);
    cli::add_reload_flags(p);
    return p;
}

Status http_options_from(const cli::ArgParser& p, http::ServerOptions& o) {
    auto int_flag = [&](const char* flag, int64_t lo, int64_t hi, auto& out) -> Status {
        if (auto v = p.get(flag)) {
            PAGODA_ASSIGN_OR_RETURN(const int64_t n, parse_int(flag, *v, lo, hi));
            out = static_cast<std::remove_reference_t<decltype(out)>>(n);
        }
        return ok_status();
    };
    if (auto v = p.get("host")) o.host = *v;
    for (Status s : {int_flag("port", 0, 65535, o.port), int_flag("http-threads", 1, 256, o.num_threads),
                     int_flag("max-body-bytes", 1024, int64_t{1} << 34, o.max_body_bytes),
                     int_flag("http-read-timeout", 1, 86400, o.read_timeout_s),
                     int_flag("shutdown-timeout", 0, 86400, o.shutdown_timeout_s)})
        PAGODA_RETURN_IF_ERROR(s);
    return ok_status();
}

// --generation-config vllm or DIR: the sampling defaults the server fills in, so the model's own never apply.
Result<std::optional<engine::GenerationConfig>> sampling_defaults_from(const std::string& value) {
    if (value == "auto") return std::optional<engine::GenerationConfig>();
    engine::GenerationConfig c;  // vllm: every field unset, i.e. OpenAI's defaults
    if (value != "vllm") {
        const std::string path = value + "/generation_config.json";
        if (!std::ifstream(path).good())
            return Status::error("--generation-config " + value +
                                 ": no generation_config.json there (auto, vllm, or "
                                 "a directory holding one)");
        auto g = model::load_generation_defaults(path);
        if (!g.ok()) return g.status().with_context("--generation-config");
        if (g->temperature) c.temperature = static_cast<float>(*g->temperature);
        if (g->top_p) c.top_p = static_cast<float>(*g->top_p);
        if (g->top_k) c.top_k = static_cast<int32_t>(*g->top_k);
        if (g->min_p) c.min_p = static_cast<float>(*g->min_p);
        if (g->repetition_penalty) c.repetition_penalty = static_cast<float>(*g->repetition_penalty);
    }
    return std::optional<engine::GenerationConfig>(c);
}

// The service's flags: names, keys, CORS, template kwargs, parsers, metrics, sampling defaults.
Status service_config_from(const cli::ArgParser& p, const std::string& model_dir, server::openai::ServiceConfig& c) {
    c.served_model_names = p.get_all("served-model-name");
    if (c.served_model_names.empty()) c.served_model_names.push_back(model_dir);
    c.model_root = model_dir;
    c.api_keys = p.get_all("api-key");
    if (c.api_keys.empty()) {
        for (const char* env : {"PAGODA_API_KEY", "VLLM_API_KEY"}) {
            const char* key = std::getenv(env);
            if (key && *key) {
                c.api_keys.push_back(key);
                break;
            }
        }
    }
    for (auto [flag, list] :
         {std::pair{"allowed-origins", &c.allowed_origins}, std::pair{"allowed-methods", &c.allowed_methods},
          std::pair{"allowed-headers", &c.allowed_headers}}) {
        if (auto v = p.get(flag)) {
            PAGODA_ASSIGN_OR_RETURN(*list, parse_list(flag, *v));
        }
    }
    c.allow_credentials = p.has("allow-credentials");
    if (auto v = p.get("default-chat-template-kwargs")) {
        auto j = Json::parse(*v);
        if (!j.ok() || !j->is_object())
            return Status::error("--default-chat-template-kwargs: not a JSON object: " + *v);
        c.default_chat_template_kwargs = std::move(j).value();
    }
    c.enable_auto_tool_choice = p.has("enable-auto-tool-choice");
    if (auto v = p.get("reasoning-parser")) {
        if (*v != "qwen3" && *v != "deepseek_r1")
            return Status::error("--reasoning-parser " + *v + ": only qwen3 (and its alias deepseek_r1) is supported");
        c.reasoning_parser = true;
    }
    if (auto v = p.get("metrics-prefix")) {
        if (*v != "pagoda" && *v != "vllm")
            return Status::error("--metrics-prefix: '" + *v + "' is not pagoda or vllm");
        c.metrics_prefix = *v;
    }
    if (auto v = p.get("generation-config")) {
        PAGODA_ASSIGN_OR_RETURN(c.sampling_defaults, sampling_defaults_from(*v));
    }
    if (auto v = p.get("engine-stall-timeout")) {
        PAGODA_ASSIGN_OR_RETURN(const int64_t n, parse_int("engine-stall-timeout", *v, 0, 86400));
        c.engine_stall_seconds = static_cast<double>(n);
    }
    return ok_status();
}

Result<std::string> device_from(const cli::ArgParser& p) {
    std::string device = "auto";
    if (auto v = p.get("device")) {
        if (*v != "auto" && *v != "cpu" && *v != "cuda")
            return Status::error("--device: '" + *v + "' is not auto, cpu or cuda");
        device = *v;
    }
    if (device == "cuda" && cuda_device_count() == 0)
        return Status::error(std::string("--device cuda: ") +
                             (cuda_compiled() ? "no CUDA GPU is visible" : "this pagoda was built without CUDA"));
    return device;
}

Result<double> gpu_memory_utilization_from(const cli::ArgParser& p, const std::string& device) {
    double gpu_memory_utilization = 0.9;
    if (auto v = p.get("gpu-memory-utilization")) {
        char* end = nullptr;
        gpu_memory_utilization = std::strtod(v->c_str(), &end);
        if (end == v->c_str() || *end != '\0' || !(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0))
            return Status::error("--gpu-memory-utilization: '" + *v + "' is not a number in (0, 1]");
        if (device == "cpu" || cuda_device_count() == 0)
            std::fprintf(stderr, "pagoda serve: warning: --gpu-memory-utilization has no effect on the CPU backend\n");
    }
    return gpu_memory_utilization;
}

Result<ServeOptions> options_from_flags(const cli::ArgParser& p, std::optional<TestGeneratorFlags> test_generator) {
    ServeOptions o;
    auto model_dir = p.positional("MODEL_DIR");
    if (!model_dir) model_dir = p.get("model");
    if (!model_dir) return Status::error("MODEL_DIR is required (see --help)");
    o.model_dir = *model_dir;
    o.test_generator = std::move(test_generator);
    o.chat_template = p.get("chat-template");
    o.tool_call_parser = p.get("tool-call-parser");
    PAGODA_RETURN_IF_ERROR(http_options_from(p, o.http));
    PAGODA_RETURN_IF_ERROR(service_config_from(p, o.model_dir, o.service));
    PAGODA_ASSIGN_OR_RETURN(o.service.task, cli::serve_task_from(p, o.model_dir));
    std::vector<std::string> allowed_ips;
    if (auto v = p.get("allowed-ips")) {
        PAGODA_ASSIGN_OR_RETURN(allowed_ips, parse_list("allowed-ips", *v));
        if (allowed_ips.empty()) return Status::error("--allowed-ips: the list is empty (it would refuse everyone)");
    }
    PAGODA_RETURN_IF_ERROR(cli::serve_ops_options_from(p, allowed_ips, o.http, o.service, o.api_keys_file));
    PAGODA_ASSIGN_OR_RETURN(o.reload_strategy, cli::reload_strategy_from(p));
    if (auto v = p.get("dtype"); v && *v != "auto" && *v != "float32" && *v != "float")
        std::fprintf(stderr, "pagoda serve: warning: --dtype %s: the CPU backend computes in float32\n", v->c_str());
    PAGODA_ASSIGN_OR_RETURN(const std::string device, device_from(p));
    PAGODA_ASSIGN_OR_RETURN(const double gpu_memory_utilization, gpu_memory_utilization_from(p, device));
    PAGODA_ASSIGN_OR_RETURN(o.nodes, parse_node_flags(p));
    if (o.test_generator) {
        if (o.nodes.nnodes > 1) return Status::error("--nnodes does not apply to the test generator");
        if (auto v = p.get("max-model-len")) {
            PAGODA_ASSIGN_OR_RETURN(const int64_t n, parse_int("max-model-len", *v, 2, 1 << 24));
            o.test_max_model_len = static_cast<int32_t>(n);
        }
        o.service.max_model_len = o.test_max_model_len;
    } else {
        PAGODA_ASSIGN_OR_RETURN(o.engine, engine_options(p, device, gpu_memory_utilization, o.nodes));
        PAGODA_RETURN_IF_ERROR(cli::apply_lora_flags(p, o.service.served_model_names, *o.engine));
        o.service.enable_lora = o.engine->enable_lora;
        // A --quantization the checkpoint does not take is refused before the server listens (the model loads
        // later, in the background).
        if (!o.engine->quantization.empty()) {
            PAGODA_ASSIGN_OR_RETURN(const model::ModelSpec spec, model::load_model_spec(o.model_dir + "/config.json"));
            auto plan = model::plan_quantization(spec.quantization, o.engine->quantization);
            if (!plan.ok()) return plan.status();
        }
    }
    return o;
}

// --- build: tokenizer, chat template, tool parser, generator ------------------------------------------------

struct ServiceParts {
    Tokenizer tokenizer;
    std::unique_ptr<chat::ChatTemplate> chat_template;  // may be null
    server::openai::ServiceConfig config;
    std::unique_ptr<server::openai::Generator> test_generator;  // the test double, when asked for
};

Result<ServiceParts> build_service_parts(const ServeOptions& o) {
    PAGODA_ASSIGN_OR_RETURN(cli::ModelTextParts text, cli::load_model_text_parts(o.model_dir, o.chat_template));
    ServiceParts parts{std::move(text.tokenizer), std::move(text.chat_template), o.service, nullptr};
    parts.config.tokenizer_config = std::move(text.tokenizer_config);
    parts.config.task = o.service.task;
    // Checked before the server listens (a reranker's tokenizer without "yes"); each loaded model reads its own.
    PAGODA_RETURN_IF_ERROR(cli::pooling_settings(o.service.task, parts.tokenizer, o.model_dir));
    if (o.tool_call_parser) {
        if (*o.tool_call_parser == "auto") {
            parts.config.tool_parser =
                chat::detect_tool_parser(parts.chat_template ? parts.chat_template->source(true) : "");
        } else {
            parts.config.tool_parser = chat::tool_parser_from_name(*o.tool_call_parser);
            if (!parts.config.tool_parser)
                return Status::error("--tool-call-parser " + *o.tool_call_parser +
                                     ": supported are hermes, qwen3_coder and auto");
        }
    }
    if (parts.config.enable_auto_tool_choice && !parts.config.tool_parser)
        return Status::error("--enable-auto-tool-choice needs --tool-call-parser (hermes, qwen3_coder or auto)");
    if (o.test_generator) {
        server::openai::ScriptedGenerator::Options go;
        go.script = parts.tokenizer.encode(o.test_generator->texts.front());
        for (size_t i = 1; i < o.test_generator->texts.size(); ++i)
            go.later_scripts.push_back(parts.tokenizer.encode(o.test_generator->texts[i]));
        go.turn_marker = parts.tokenizer.encode("<|im_start|>assistant");
        if (auto eos = parts.tokenizer.token_to_id("<|im_end|>")) go.eos_token_ids.push_back(*eos);
        go.max_model_len = o.test_max_model_len;
        go.token_interval_us = o.test_generator->token_interval_us;
        std::fprintf(stderr, "pagoda serve: TEST GENERATOR: no model runs; every request gets the scripted text\n");
        parts.test_generator = std::make_unique<server::openai::ScriptedGenerator>(std::move(go));
    }
    return parts;
}

// --- run ---------------------------------------------------------------------------------------------------

// A node other than node 0 runs node 0's steps and serves nothing.
int run_worker_node(const ServeOptions& o) {
    // The worker logs what it is (node R of M, a worker of node 0 at HOST:PORT) and each stage it reaches.
    if (Status s = executor::run_tensor_parallel_worker(o.model_dir, *o.engine); !s.ok())
        return cli::fail(kCmd, o.model_dir + ": " + s.message());
    std::fprintf(stderr, "pagoda serve: stopped\n");
    return 0;
}

// The curl example sets max_tokens: without it a request may run to the end of the context (the demo model's
// random weights rarely say EOS), minutes of output for a first try.
void print_banner(const ServeOptions& o, const std::string& served_name, uint16_t port) {
    const std::string url = (o.http.tls.enabled() ? "https://" : "http://") + o.http.host + ":" + std::to_string(port);
    std::fprintf(stderr,
                 "pagoda serve: serving %s as \"%s\" on %s\n"
                 "  try: curl %s/v1/chat/completions -H 'Content-Type: application/json' -d "
                 "'{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],"
                 "\"max_tokens\":32}'\n",
                 o.model_dir.c_str(), served_name.c_str(), url.c_str(), url.c_str(), served_name.c_str());
    std::fflush(stderr);
}

// The model loaded in the background while the server already answers (/health: 503 until it is ready).
struct ModelLoad {
    std::thread thread;
    std::string error;
    std::mutex group_error_mutex;
    std::string group_error;  // set on the engine thread when a group of several nodes breaks
};

void start_model_load(const ServeOptions& o, executor::EngineOptions options, http::Server& srv,
                      server::openai::OpenAiService& service, const std::atomic<bool>& stopping, ModelLoad& load,
                      cli::SystemdLink& systemd) {
    std::fprintf(stderr, "pagoda serve: loading %s ...\n", o.model_dir.c_str());
    // Several nodes: a broken group fails every later step, so node 0 stops serving (and exits 1) for the launcher
    // to restart the whole group.
    options.cancel_node_wait = &stopping;
    options.on_node_group_failure = [&load, &srv](const Status& s) {
        {
            std::lock_guard<std::mutex> lock(load.group_error_mutex);
            load.group_error = s.message();
        }
        srv.shutdown();
    };
    load.thread = std::thread([&o, options = std::move(options), &srv, &service, &load, &systemd] {
        std::string summary;
        const auto first = service.model();  // the tokenizer and template read before listening
        auto m = cli::start_served_model(o.model_dir, first->tokenizer, first->chat_template, options, o.service.task,
                                         &summary);
        if (!m.ok()) {
            load.error = o.model_dir + ": " + m.message();
            srv.shutdown();
            return;
        }
        const int32_t max_model_len = (*m)->max_model_len.load();
        service.set_max_model_len(max_model_len);
        service.install_model(std::move(m).value());
        service.set_ready(true);
        service.watch_engine();
        // The watchdog's proof of life: the engine thread answers between two steps (Generator::wait_for_turn).
        systemd.ready([&service] { service.probe_engine(); });
        std::fprintf(stderr, "pagoda serve: model loaded; ready (%s)\n", summary.c_str());
    });
}

// Listens at once, loads the model in the background (or serves the test double), serves until SIGTERM/SIGINT.
int serve(const ServeOptions& o, ServiceParts parts) {
    server::openai::DeferredGenerator deferred;
    if (parts.test_generator) deferred.set(parts.test_generator.get());
    const std::string served_name = parts.config.served_model_names.front();
    server::openai::OpenAiService service(std::move(parts.config), std::move(parts.tokenizer),
                                          std::move(parts.chat_template), deferred);
    std::string no_reload;  // why POST /v1/models/reload is refused; empty: it is served
    if (parts.test_generator) no_reload = "this server runs the test generator, not a model";
    if (o.nodes.nnodes > 1) no_reload = "not with --nnodes > 1 yet";
    service.set_model_loader(cli::make_model_loader(o.engine.value_or(executor::EngineOptions{}), o.service.task,
                                                    o.chat_template, o.reload_strategy, no_reload,
                                                    o.test_hooks.reload_delay_ms));
    http::ServerOptions http_options = o.http;
    http_options.on_status = [&service](int status) { service.count_http_response(status); };
    auto srv = http::Server::create(http_options, [&service](http::Request req, std::shared_ptr<http::Responder> r) {
        service.handle(std::move(req), std::move(r));
    });
    if (!srv.ok()) return cli::fail(kCmd, srv.message());
    std::atomic<bool> stopping{false};  // node 0 of several stops waiting for the other nodes
    cli::SystemdLink systemd;
    (*srv)->on_shutdown([&service, &stopping, &systemd] {
        service.set_draining();
        stopping.store(true);
        systemd.stopping();
    });
    (*srv)->on_reload([&o, &service] { cli::reload_on_sighup(o.api_keys_file, service, o.http.access_log.get()); });
    print_banner(o, served_name, (*srv)->port());

    ModelLoad load;
    if (parts.test_generator) {
        service.set_ready(true);
        service.watch_engine();
        systemd.ready([&deferred] { deferred.wait_for_turn(); });
    } else {
        systemd.status("loading " + o.model_dir);
        start_model_load(o, *o.engine, **srv, service, stopping, load, systemd);
    }
    (*srv)->run();
    if (load.thread.joinable()) load.thread.join();
    systemd.stop_watchdog();  // its probe reads the engine, which stops below
    if (!load.error.empty()) return cli::fail(kCmd, load.error);
    std::fprintf(stderr, "pagoda serve: stopped\n");
    // In-flight requests have finished or timed out; stop the engine before the service and server go away.
    service.stop_engine();
    std::lock_guard<std::mutex> lock(load.group_error_mutex);
    if (!load.group_error.empty()) return cli::fail(kCmd, load.group_error);
    return 0;
}

int run_serve(std::span<const std::string_view> cli_args) {
    std::vector<std::string> kept;
    std::optional<TestGeneratorFlags> test_generator;
    TestHooks hooks;
    if (Status s = preprocess_args(cli_args, kept, test_generator, hooks); !s.ok()) return cli::fail(kCmd, s.message());
    const std::vector<std::string_view> args(kept.begin(), kept.end());
    cli::ArgParser p = make_serve_parser();
    if (auto exit = cli::parse_or_exit(p, kCmd, args)) return *exit;
    auto options = options_from_flags(p, std::move(test_generator));
    if (!options.ok()) return cli::fail(kCmd, options.message());
    options->test_hooks = hooks;
    static std::optional<StepDelay> step_delay;  // outlives every engine (reloads included)
    if (hooks.step_delay_ms > 0 && options->engine) {
        step_delay.emplace(hooks.step_delay_ms);
        options->engine->observer = &*step_delay;
    }
    if (options->nodes.node_rank > 0) return run_worker_node(*options);
    auto parts = build_service_parts(*options);
    if (!parts.ok()) return cli::fail(kCmd, parts.message());
    return serve(*options, std::move(parts).value());
}

}  // namespace

PAGODA_COMMAND("serve", "serve a model over an OpenAI-compatible HTTP API", run_serve);
