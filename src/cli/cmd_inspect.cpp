// `pagoda inspect MODEL_DIR`: what a model directory holds — architecture, layer plan, parameter
// counts, dtype, weight bytes and cache sizes — without loading anything onto a device.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "common/json.h"
#include "model/arch/arch.h"
#include "model/model_dir.h"
#include "model/quantization.h"
#include "model/rope.h"

namespace {

using pagoda::Json;
using namespace pagoda::model;

Json int_json(int64_t v) {
    return Json(v);
}
Json size_json(size_t v) {
    return Json(static_cast<int64_t>(v));
}
template <typename T>
Json optional_json(const std::optional<T>& v) {
    return v ? Json(*v) : Json();
}
Json int_list(const std::vector<int64_t>& v) {
    Json a = Json::array();
    for (int64_t x : v)
        a.push_back(Json(x));
    return a;
}

// Bytes per element of the config's dtype (the KV cache follows the model dtype by default).
size_t dtype_bytes(const std::string& dtype) {
    if (dtype == "float32") return 4;
    if (dtype == "float8_e4m3fn" || dtype == "float8_e5m2") return 1;
    return 2;  // bfloat16, float16, or absent
}

std::string human_bytes(size_t n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= 1024.0 && u < 4)
        v /= 1024.0, ++u;
    char buf[64];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
    return buf;
}

std::string human_count(int64_t n) {
    char buf[64];
    if (n >= 1'000'000'000)
        std::snprintf(buf, sizeof buf, "%.2fB", static_cast<double>(n) / 1e9);
    else if (n >= 1'000'000)
        std::snprintf(buf, sizeof buf, "%.2fM", static_cast<double>(n) / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
    return buf;
}

// The parsed spec, field by field (the oracle test compares it with transformers' config classes).
Json spec_json(const ModelSpec& s) {
    Json j = Json::object();
    j.set("family", Json(family_name(s.family)));
    j.set("model_type", Json(s.model_type));
    j.set("text_model_type", Json(s.text_model_type));
    Json arch = Json::array();
    for (const auto& a : s.architectures)
        arch.push_back(Json(a));
    j.set("architectures", arch);
    j.set("weight_prefix", Json(s.weight_prefix));
    j.set("hidden_size", int_json(s.hidden_size));
    j.set("intermediate_size", int_json(s.intermediate_size));
    j.set("num_hidden_layers", int_json(s.num_hidden_layers));
    j.set("num_attention_heads", int_json(s.num_attention_heads));
    j.set("num_key_value_heads", int_json(s.num_key_value_heads));
    j.set("head_dim", int_json(s.head_dim));
    j.set("vocab_size", int_json(s.vocab_size));
    j.set("rms_norm_eps", Json(s.rms_norm_eps));
    j.set("hidden_act", Json(s.hidden_act));
    j.set("max_position_embeddings", int_json(s.max_position_embeddings));
    j.set("max_context_length", int_json(max_context_length(s)));
    j.set("tie_word_embeddings", Json(s.tie_word_embeddings));
    Json rope = Json::object();
    rope.set("rope_type", Json(s.rope.type));
    rope.set("rope_theta", Json(s.rope.theta));
    rope.set("partial_rotary_factor", Json(s.rope.partial_rotary_factor));
    rope.set("rotary_dim", int_json(s.rope.rotary_dim));
    rope.set("factor", Json(s.rope.factor));
    rope.set("original_max_position_embeddings", int_json(s.rope.original_max_position_embeddings));
    rope.set("beta_fast", optional_json(s.rope.beta_fast));
    rope.set("beta_slow", optional_json(s.rope.beta_slow));
    rope.set("attention_factor", optional_json(s.rope.attention_factor));
    rope.set("mscale", optional_json(s.rope.mscale));
    rope.set("mscale_all_dim", optional_json(s.rope.mscale_all_dim));
    rope.set("truncate", Json(s.rope.truncate));
    rope.set("mrope_section", int_list(s.rope.mrope_section));
    rope.set("mrope_interleaved", Json(s.rope.mrope_interleaved));
    j.set("rope", rope);
    j.set("attention_bias", Json(s.attention_bias));
    j.set("qk_norm", Json(s.qk_norm));
    j.set("attn_output_gate", Json(s.attn_output_gate));
    j.set("zero_centered_norm", Json(s.zero_centered_norm));
    j.set("use_sliding_window", Json(s.use_sliding_window));
    j.set("sliding_window", optional_json(s.sliding_window));
    j.set("max_window_layers", int_json(s.max_window_layers));
    j.set("num_experts", int_json(s.num_experts));
    j.set("num_experts_per_tok", int_json(s.num_experts_per_tok));
    j.set("moe_intermediate_size", int_json(s.moe_intermediate_size));
    j.set("shared_expert_intermediate_size", int_json(s.shared_expert_intermediate_size));
    j.set("norm_topk_prob", Json(s.norm_topk_prob));
    j.set("decoder_sparse_step", int_json(s.decoder_sparse_step));
    j.set("mlp_only_layers", int_list(s.mlp_only_layers));
    j.set("experts_fused", Json(s.experts_fused));
    j.set("linear_num_key_heads", int_json(s.linear_num_key_heads));
    j.set("linear_num_value_heads", int_json(s.linear_num_value_heads));
    j.set("linear_key_head_dim", int_json(s.linear_key_head_dim));
    j.set("linear_value_head_dim", int_json(s.linear_value_head_dim));
    j.set("linear_conv_kernel_dim", int_json(s.linear_conv_kernel_dim));
    j.set("full_attention_interval", int_json(s.full_attention_interval));
    j.set("mtp_num_hidden_layers", int_json(s.mtp_num_hidden_layers));
    j.set("quantization", Json(s.quantization.describe()));
    Json layer_types = Json::array();
    Json mlp_types = Json::array();
    for (const LayerSpec& l : s.layers) {
        layer_types.push_back(
            Json(l.sliding_window ? std::string("sliding_attention") : std::string(to_string(l.attention))));
        mlp_types.push_back(Json(to_string(l.mlp)));
    }
    j.set("layer_types", layer_types);
    j.set("mlp_types", mlp_types);
    j.set("dtype", s.dtype.empty() ? Json() : Json(s.dtype));
    j.set("bos_token_id", optional_json(s.bos_token_id));
    j.set("pad_token_id", optional_json(s.pad_token_id));
    j.set("eos_token_id", int_list(s.eos_token_ids));
    return j;
}

Json generation_json(const GenerationDefaults& g) {
    Json j = Json::object();
    j.set("temperature", optional_json(g.temperature));
    j.set("top_p", optional_json(g.top_p));
    j.set("top_k", optional_json(g.top_k));
    j.set("min_p", optional_json(g.min_p));
    j.set("repetition_penalty", optional_json(g.repetition_penalty));
    j.set("do_sample", optional_json(g.do_sample));
    j.set("max_new_tokens", optional_json(g.max_new_tokens));
    j.set("bos_token_id", optional_json(g.bos_token_id));
    j.set("pad_token_id", optional_json(g.pad_token_id));
    j.set("eos_token_id", int_list(g.eos_token_ids));
    return j;
}

// What `serve` reads of the checkpoint: the tensors the model's weights structs declare (visit_weights), counted
// from the config's shapes (the parts Qwen3-Next's packed projections are split into count as the packed tensors
// would). A tied LM head counts only when the checkpoint holds one. None for a config with a negative size, which
// the loader refuses and no shape can hold.
struct LoadedWeights {
    int64_t params = 0;
    size_t tensors = 0;
};
std::optional<LoadedWeights> loaded_weights(const ModelSpec& s, const Checkpoint& checkpoint) {
    if (s.intermediate_size < 0 || s.moe_intermediate_size < 0 || s.shared_expert_intermediate_size < 0) return {};
    ModelWeights declared = declared_weights(s);
    LoadedWeights n;
    const pagoda::Status walked = visit_weights(declared, s, [&](const WeightEntry& e) {
        if (e.optional && checkpoint.find(e.name) == nullptr) return pagoda::ok_status();
        n.params += e.numel();
        n.tensors += 1;
        return pagoda::ok_status();
    });
    if (!walked.ok()) return {};
    return n;
}

// The format each decoder layer's linear weights are stored in (as the loader reads them: a weight stored F8_E4M3
// is fp8 with the quantization_config's scales, one whose module holds an int4 checkpoint's packed tensor is int4,
// any other dtype dense), with runs of layers alike merged: what a quantized checkpoint left unquantized shows by
// name ("fp8-e4m3 (128x128 block scales); bf16: mlp.gate"). With it, the bytes of linear weights one token reads in
// each layer as pagoda holds them (data, plus F32 scales and zero points; of a stack of experts the routed share).
struct LayerFormats {
    std::string layers;  // "0-47", "3"
    std::string formats;
    size_t bytes_per_token = 0;
};
struct StoredLinear {
    std::string format;
    size_t bytes = 0;  // what one token reads of it
};
// Whether a GPTQ module's g_idx groups its inputs out of order (act-order: the loader sorts them and the layer gathers
// its input by that order, LinearWeight::input_perm). Read as the loader reads it; a malformed one is not act-order
// here (loading says what is wrong with it).
bool gptq_act_order(const std::string& weight_name, int64_t K, int64_t group, const Checkpoint& checkpoint) {
    const TensorView* g = checkpoint.find(module_prefix(weight_name) + "g_idx");
    if (g == nullptr || (g->dtype != StorageDType::kI32 && g->dtype != StorageDType::kU32) || g->shape.size() != 1 ||
        g->shape[0] != K)
        return false;
    for (int64_t k = 0; k < K; ++k) {
        int32_t v;
        std::memcpy(&v, g->data + 4 * k, 4);
        if (v != k / group) return true;
    }
    return false;
}

// `t`: the stored weight tensor, or null when the module holds the packed int4 tensors instead.
StoredLinear stored_linear(const WeightEntry& e, const TensorView* t,
                           const std::optional<CheckpointQuantization>& stored, const Checkpoint& checkpoint,
                           const std::string& stored_name) {
    const auto numel = static_cast<size_t>(e.shape.numel());
    if (t == nullptr) {  // int4 (int8): the layout's nibbles (bytes), scales and zero points
        // (the module's own bits and group where a quantization rule gives it some, as the loader reads it)
        const auto resolved = stored->for_module(stored_name);
        const std::optional<CheckpointQuantization> q = resolved.ok() ? *resolved : *stored;
        const int64_t K = e.shape[e.shape.rank() - 1];
        const auto group = static_cast<size_t>(q->group_size > 0 ? q->group_size : K);
        StoredLinear out{q->describe(),
                         numel * static_cast<size_t>(q->bits()) / 8 + numel / group * 4 * (q->zero_points ? 2 : 1)};
        if (!resolved.ok()) out.format += " (refused: " + resolved.message() + ")";
        if (q->packing == Int4Packing::kGptq &&
            gptq_act_order(stored_name, K, static_cast<int64_t>(group), checkpoint)) {
            out.format += ", act-order";
            out.bytes += static_cast<size_t>(K) * 4;  // the input permutation (I32 [K]) the gather reads
        }
        return out;
    }
    const std::optional<CheckpointQuantization>& q = stored;
    if (t->dtype == StorageDType::kF8_E4M3) {
        const TensorView* scales = q ? checkpoint.find(scale_name(e.name, *q)) : nullptr;
        size_t scale_count = 0;
        if (scales != nullptr) {
            scale_count = 1;
            for (int64_t d : scales->shape)
                scale_count *= static_cast<size_t>(d);
        }
        return {q ? q->describe() : "fp8-e4m3 (no quantization_config)", numel + scale_count * 4};
    }
    std::string name(storage_dtype_name(t->dtype));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    return {name, numel * storage_dtype_size(t->dtype)};
}  // One layer's (or the top level's) formats: the most common one first, then each other one with the weights it
   // holds.
std::string describe_formats(const std::vector<std::pair<std::string, std::string>>& weights) {
    std::map<std::string, std::vector<std::string>> by_format;
    for (const auto& [format, name] : weights)
        by_format[format].push_back(name);
    auto most = std::max_element(by_format.begin(), by_format.end(),
                                 [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    if (most == by_format.end()) return "-";
    std::string out = most->first;
    for (const auto& [format, names] : by_format) {
        if (format == most->first) continue;
        out += "; " + format + ":";
        for (const std::string& n : names)
            out += " " + n;
    }
    return out;
}
std::vector<LayerFormats> layer_formats(const ModelSpec& s, const Checkpoint& checkpoint, std::string& lm_head) {
    const auto quantization = checkpoint_quantization(s.quantization);
    const std::optional<CheckpointQuantization> q = quantization.ok() ? *quantization : std::nullopt;
    const bool int4 = q && q->bits() != 0;  // int4, or GPTQ int8: packed tensors beside each module
    ModelWeights declared = declared_weights(s);
    std::vector<std::vector<std::pair<std::string, std::string>>> per_layer(declared.layers.size());
    std::vector<size_t> layer_bytes(declared.layers.size());
    const std::string layers = s.weight_prefix + "layers.";
    lm_head = s.tie_word_embeddings ? "tied to the embedding" : "-";
    const pagoda::Status walked = visit_weights(declared, s, [&](const WeightEntry& e) {
        std::string stored_name = e.name;
        if (checkpoint.find(e.name) == nullptr) {
            // Experts stored one by one: the first expert's weight (or its packed int4 tensors) stands for the stack.
            // (The declared weights are not prepared, so their stacks are declared fused whatever the checkpoint.)
            for (const auto& [stack, first] :
                 {std::pair<const char*, const char*>{"gate_up_proj", "0.gate_proj.weight"},
                  {"down_proj", "0.down_proj.weight"}}) {
                if (e.name.ends_with(std::string("experts.") + stack))
                    stored_name = e.name.substr(0, e.name.size() - std::strlen(stack)) + first;
            }
        }
        const TensorView* t = checkpoint.find(stored_name);
        const bool packed = t == nullptr && int4 && checkpoint.find(packed_name(stored_name, *q)) != nullptr;
        if (e.linear == nullptr || (t == nullptr && !packed)) return pagoda::ok_status();  // norms; packed projections
        StoredLinear stored = stored_linear(e, t, q, checkpoint, stored_name);
        if (e.shape.rank() == 3 && s.num_experts > 0)  // a token reads its routed experts' share of the stack
            stored.bytes =
                stored.bytes / static_cast<size_t>(s.num_experts) * static_cast<size_t>(s.num_experts_per_tok);
        if (e.linear == &declared.lm_head) {
            lm_head = stored.format;
        } else if (e.name.rfind(layers, 0) == 0) {
            const size_t dot = e.name.find('.', layers.size());
            const size_t i = std::stoul(e.name.substr(layers.size(), dot - layers.size()));
            std::string short_name = e.name.substr(dot + 1);
            if (short_name.ends_with(".weight")) short_name.resize(short_name.size() - 7);
            if (i < per_layer.size()) {
                per_layer[i].emplace_back(stored.format, short_name);
                layer_bytes[i] += stored.bytes;
            }
        }
        return pagoda::ok_status();
    });
    std::vector<LayerFormats> out;
    if (!walked.ok()) return out;
    for (size_t i = 0; i < per_layer.size(); ++i) {
        const std::string f = describe_formats(per_layer[i]);
        if (!out.empty() && out.back().formats == f && out.back().bytes_per_token == layer_bytes[i]) {
            const size_t dash = out.back().layers.find('-');
            out.back().layers = out.back().layers.substr(0, dash) + "-" + std::to_string(i);
        } else {
            out.push_back({std::to_string(i), f, layer_bytes[i]});
        }
    }
    return out;
}

Json file_or_null(const std::optional<std::string>& p) {
    return p ? Json(*p) : Json();
}

int run_inspect(std::span<const std::string_view> args) {
    pagoda::cli::ArgParser parser("pagoda inspect MODEL_DIR [--json] [--tensors]",
                                  "Describes a Hugging Face model directory: architecture, layer plan, parameter "
                                  "counts, dtype, weight bytes, KV-cache bytes per token and linear-attention state "
                                  "bytes per sequence. Weights are memory-mapped and their headers validated.");
    parser.add_positional("MODEL_DIR", "the model directory (config.json, *.safetensors, tokenizer files)");
    parser.add_switch("json", "print one JSON object instead of text");
    parser.add_switch("tensors", "also list every tensor (name, dtype, shape)");
    if (auto exit = pagoda::cli::parse_or_exit(parser, "inspect", args)) return *exit;
    const std::string dir = *parser.positional("MODEL_DIR");

    auto files = locate_model_files(dir);
    if (!files.ok()) return pagoda::cli::fail("inspect", files.message());
    const bool has_weights = require_weights(files.value()).ok();
    auto opened = ModelDir::open(dir, has_weights);
    if (!opened.ok()) return pagoda::cli::fail("inspect", opened.message());
    const ModelDir& m = opened.value();
    const ModelSpec& s = m.spec;
    std::optional<WeightSummary> w;
    std::optional<LoadedWeights> loaded;
    if (m.checkpoint) w = summarize_weights(s, *m.checkpoint), loaded = loaded_weights(s, *m.checkpoint);
    std::vector<LayerFormats> formats;
    std::string lm_head_format;
    if (m.checkpoint && loaded) formats = layer_formats(s, *m.checkpoint, lm_head_format);
    const size_t elem = dtype_bytes(s.dtype);
    const size_t kv = s.kv_cache_bytes_per_token(elem);
    const size_t state = s.linear_state_bytes_per_sequence();

    if (parser.has("json")) {
        Json j = Json::object();
        j.set("path", Json(dir));
        j.set("model_type", Json(s.model_type));
        j.set("family", Json(family_name(s.family)));
        j.set("dtype", s.dtype.empty() ? Json() : Json(s.dtype));
        Json plan = Json::object();
        plan.set("attention", Json(s.attention_plan_string()));
        plan.set("mlp", Json(s.mlp_plan_string()));
        plan.set("full_attention_layers", int_json(s.num_full_attention_layers()));
        plan.set("linear_attention_layers", int_json(s.num_linear_attention_layers()));
        j.set("layer_plan", plan);
        j.set("kv_cache_dtype_bytes", size_json(elem));
        j.set("kv_cache_bytes_per_token", size_json(kv));
        j.set("linear_state_bytes_per_sequence", size_json(state));
        if (w) {
            Json p = Json::object();
            p.set("total", int_json(w->params.total));
            p.set("embedding", int_json(w->params.embedding));
            p.set("text_model", int_json(w->params.text_model));
            p.set("other", int_json(w->params.other));
            p.set("vision", int_json(w->params.vision));
            p.set("mtp", int_json(w->params.mtp));
            j.set("parameters", p);
            Json by_dtype = Json::object();
            for (const auto& [dt, n] : w->params_by_dtype)
                by_dtype.set(dt, int_json(n));
            j.set("parameters_by_dtype", by_dtype);
            j.set("weight_bytes", size_json(w->weight_bytes));
            j.set("num_tensors", size_json(w->num_tensors));
            j.set("num_weight_files", size_json(m.checkpoint->files().size()));
            j.set("loaded_parameters", loaded ? int_json(loaded->params) : Json());
            j.set("loaded_tensors", loaded ? size_json(loaded->tensors) : Json());
            Json lf = Json::array();
            for (const LayerFormats& f : formats) {
                Json e = Json::object();
                e.set("layers", Json(f.layers));
                e.set("formats", Json(f.formats));
                e.set("bytes_per_token", size_json(f.bytes_per_token));
                lf.push_back(e);
            }
            j.set("layer_formats", lf);
            j.set("lm_head_format", Json(lm_head_format));
        } else {
            j.set("parameters", Json());
            j.set("weight_bytes", Json());
            j.set("num_tensors", Json());
        }
        if (parser.has("tensors") && m.checkpoint) {
            Json list = Json::array();
            for (const TensorView* t : m.checkpoint->tensors()) {
                Json e = Json::object();
                e.set("name", Json(t->name));
                e.set("dtype", Json(storage_dtype_name(t->dtype)));
                Json shape = Json::array();
                for (int64_t d : t->shape)
                    shape.push_back(Json(d));
                e.set("shape", shape);
                e.set("nbytes", size_json(t->nbytes));
                list.push_back(e);
            }
            j.set("tensors", list);
        }
        Json f = Json::object();
        f.set("config", Json(m.files.config));
        f.set("generation_config", file_or_null(m.files.generation_config));
        f.set("tokenizer_json", file_or_null(m.files.tokenizer_json));
        f.set("vocab_json", file_or_null(m.files.vocab_json));
        f.set("merges_txt", file_or_null(m.files.merges_txt));
        f.set("tokenizer_config", file_or_null(m.files.tokenizer_config));
        f.set("chat_template", file_or_null(m.files.chat_template));
        f.set("safetensors_index", file_or_null(m.files.safetensors_index));
        j.set("files", f);
        j.set("generation", generation_json(m.generation));
        j.set("spec", spec_json(s));
        std::string out = j.dump();
        out += '\n';
        std::fputs(out.c_str(), stdout);
        return 0;
    }

    std::string arch = s.architectures.empty() ? std::string("-") : s.architectures.front();
    std::printf("model:          %s\n", dir.c_str());
    std::printf("architecture:   %s (model_type %s", arch.c_str(), s.model_type.c_str());
    if (s.text_model_type != s.model_type) std::printf(", text %s", s.text_model_type.c_str());
    std::printf(")\n");
    std::printf("dimensions:     hidden %lld, layers %lld, heads %lld q / %lld kv, head_dim %lld, vocab %lld\n",
                static_cast<long long>(s.hidden_size), static_cast<long long>(s.num_hidden_layers),
                static_cast<long long>(s.num_attention_heads), static_cast<long long>(s.num_key_value_heads),
                static_cast<long long>(s.head_dim), static_cast<long long>(s.vocab_size));
    if (s.has_moe())
        std::printf("experts:        %lld, top-%lld, expert width %lld, shared expert width %lld\n",
                    static_cast<long long>(s.num_experts), static_cast<long long>(s.num_experts_per_tok),
                    static_cast<long long>(s.moe_intermediate_size),
                    static_cast<long long>(s.shared_expert_intermediate_size));
    else
        std::printf("mlp width:      %lld\n", static_cast<long long>(s.intermediate_size));
    std::printf("attention plan: %s  (F full, L linear, S sliding; %lld full, %lld linear)\n",
                s.attention_plan_string().c_str(), static_cast<long long>(s.num_full_attention_layers()),
                static_cast<long long>(s.num_linear_attention_layers()));
    std::printf("mlp plan:       %s\n", s.mlp_plan_string().c_str());
    std::printf("rope:           %s, theta %g, rotary dim %lld of %lld\n", s.rope.type.c_str(), s.rope.theta,
                static_cast<long long>(s.rope.rotary_dim), static_cast<long long>(s.head_dim));
    if (s.rope.type == "yarn") {
        auto table = rope_table_for(s);
        if (table.ok())
            std::printf("context:        %lld tokens (yarn: %lld × %g; cos/sin scaled by %.4g)\n",
                        static_cast<long long>(max_context_length(s)),
                        static_cast<long long>(s.rope.original_max_position_embeddings), s.rope.factor,
                        table->attention_factor);
    }
    std::printf("dtype:          %s\n", s.dtype.empty() ? "(not given)" : s.dtype.c_str());
    std::printf("quantization:   %s\n", s.quantization.describe().c_str());
    if (w) {
        std::printf("parameters:     %s total: embedding %s, text model %s, other %s",
                    human_count(w->params.total).c_str(), human_count(w->params.embedding).c_str(),
                    human_count(w->params.text_model).c_str(), human_count(w->params.other).c_str());
        if (w->params.other)
            std::printf(" (vision %s, mtp %s)", human_count(w->params.vision).c_str(),
                        human_count(w->params.mtp).c_str());
        std::printf("\n");
        std::string dtypes;
        for (const auto& [dt, n] : w->params_by_dtype)
            dtypes += (dtypes.empty() ? "" : ", ") + dt + " " + human_count(n);
        std::printf("tensor dtypes:  %s\n", dtypes.c_str());
        std::printf("weight bytes:   %zu (%s) in %zu tensors, %zu files\n", w->weight_bytes,
                    human_bytes(w->weight_bytes).c_str(), w->num_tensors, m.checkpoint->files().size());
        if (loaded)
            std::printf("loaded:         %s parameters as %zu tensors (experts stacked, packed projections split)\n",
                        human_count(loaded->params).c_str(), loaded->tensors);
        for (const LayerFormats& f : formats)
            std::printf("%-15s %s; reads %s of linear weights per token and layer\n",
                        ((f.layers.find('-') == std::string::npos ? "layer " : "layers ") + f.layers + ":").c_str(),
                        f.formats.c_str(), human_bytes(f.bytes_per_token).c_str());
        if (!formats.empty()) std::printf("lm_head:        %s\n", lm_head_format.c_str());
    } else {
        std::printf("weights:        none found\n");
    }
    std::printf("kv cache:       %zu bytes per token (%s, %zu-byte elements)\n", kv, human_bytes(kv).c_str(), elem);
    if (s.has_linear_attention())
        std::printf("linear state:   %zu bytes per sequence (%s, fp32)\n", state, human_bytes(state).c_str());
    std::string eos;
    for (int64_t id : s.eos_token_ids)
        eos += (eos.empty() ? "" : " ") + std::to_string(id);
    std::printf("eos token ids:  %s\n", eos.empty() ? "(none in config.json)" : eos.c_str());
    if (m.files.generation_config) {
        const GenerationDefaults& g = m.generation;
        std::string line;
        auto add = [&line](const char* name, const std::string& value) {
            line += (line.empty() ? "" : ", ") + std::string(name) + " " + value;
        };
        char buf[32];
        auto num = [&buf](double v) {
            std::snprintf(buf, sizeof buf, "%g", v);
            return std::string(buf);
        };
        if (g.temperature) add("temperature", num(*g.temperature));
        if (g.top_p) add("top_p", num(*g.top_p));
        if (g.top_k) add("top_k", std::to_string(*g.top_k));
        if (g.min_p) add("min_p", num(*g.min_p));
        if (g.repetition_penalty) add("repetition_penalty", num(*g.repetition_penalty));
        if (!g.eos_token_ids.empty()) {
            std::string ids;
            for (int64_t id : g.eos_token_ids)
                ids += (ids.empty() ? "" : " ") + std::to_string(id);
            add("eos", ids);
        }
        std::printf("generation:     %s\n", line.empty() ? "(no sampling defaults)" : line.c_str());
    }
    std::string present;
    for (const auto& [name, p] :
         {std::pair{"tokenizer.json", &m.files.tokenizer_json}, std::pair{"vocab.json", &m.files.vocab_json},
          std::pair{"merges.txt", &m.files.merges_txt}, std::pair{"tokenizer_config.json", &m.files.tokenizer_config},
          std::pair{"chat_template.jinja", &m.files.chat_template}})
        if (p->has_value()) present += (present.empty() ? "" : ", ") + std::string(name);
    std::printf("tokenizer:      %s\n", present.empty() ? "(no tokenizer files)" : present.c_str());
    return 0;
}

}  // namespace

PAGODA_COMMAND("inspect", "describe a model directory: architecture, layers, parameters, cache sizes", run_inspect);
