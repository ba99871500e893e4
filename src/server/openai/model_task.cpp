// What a model served for one task answers on another's endpoints, and the tokens of a prompt-only request.
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

const char* task_words(ModelTask task) {
    switch (task) {
        case ModelTask::kGenerate:
            return "text generation";
        case ModelTask::kEmbed:
            return "embeddings (--task embed)";
        case ModelTask::kScore:
            return "scores (--task score)";
    }
    return "?";
}

}  // namespace

void handle_not_generating(ServiceContext& ctx, Exchange x) {
    send_error(x, ApiError::bad_request("this model is served for " + std::string(task_words(ctx.config.task)) + ": " +
                                        x.request.path +
                                        " needs a generation model; use /v1/embeddings, /v1/score or /v1/rerank"));
}

std::optional<ApiError> check_task(const ServiceContext& ctx, ModelTask want, std::string_view endpoint) {
    if (ctx.config.task == want) return std::nullopt;
    const char* how = want == ModelTask::kEmbed ? "an embedding model (pagoda serve --task embed, or a model directory "
                                                  "whose modules.json has a sentence-transformers Pooling module)"
                                                : "a reranker (pagoda serve --task score)";
    return ApiError::bad_request("this model is served for " + std::string(task_words(ctx.config.task)) + "; " +
                                 std::string(endpoint) + " needs " + how);
}

std::optional<ApiError> pooling_prompt_tokens(const ServedModel& model, const Prompt& p, bool add_special_tokens,
                                              std::optional<int64_t> truncate, const std::string& where,
                                              std::vector<int32_t>& out) {
    out.clear();
    if (p.is_tokens) {
        for (int32_t t : p.tokens)
            if (!model.tokenizer.is_valid_id(t))
                return ApiError::bad_request(
                    "'" + where + "': token id " + std::to_string(t) + " is outside the vocabulary", where);
        out = p.tokens;
    } else {
        const std::span<const int32_t> prefix =
            add_special_tokens ? model.tokenizer.special_prefix() : std::span<const int32_t>();
        const std::span<const int32_t> suffix =
            add_special_tokens ? model.tokenizer.special_suffix() : std::span<const int32_t>();
        out.assign(prefix.begin(), prefix.end());
        model.tokenizer.encode(p.text, out, /*parse_special=*/true);
        out.insert(out.end(), suffix.begin(), suffix.end());
    }
    if (out.empty()) return ApiError::bad_request("'" + where + "' is empty", where);
    const int64_t max_len = model.max_model_len.load();
    if (truncate) {
        const int64_t keep = *truncate < 0 ? max_len : *truncate;
        if (static_cast<int64_t>(out.size()) > keep)  // as vLLM: the prompt's end is kept
            out.erase(out.begin(), out.end() - keep);
    }
    if (max_len > 0 && static_cast<int64_t>(out.size()) > max_len)
        return ApiError::bad_request("'" + where + "' has " + std::to_string(out.size()) +
                                         " tokens; this model's maximum context length is " + std::to_string(max_len) +
                                         " tokens (truncate_prompt_tokens cuts inputs to their last N tokens)",
                                     where);
    return std::nullopt;
}

}  // namespace pagoda::server::openai
