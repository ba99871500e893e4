// POST /v1/completions: one engine request per prompt (a string, token ids, or lists of either), n choices each;
// a CompletionJob answers from then on.
#include "server/openai/completion_job.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

// The engine request of one prompt and the text its choices echo, or the error that refuses it.
std::optional<ApiError> prepare_prompt(const ServedModel& model, const CompletionRequest& cr, const Prompt& p,
                                       engine::Request& request, std::string& echo) {
    if (p.is_tokens) {
        for (int32_t t : p.tokens)
            if (!model.tokenizer.is_valid_id(t))
                return ApiError::bad_request("prompt token id " + std::to_string(t) + " is outside the vocabulary",
                                             "prompt");
        request.prompt_tokens = p.tokens;
    } else {
        request.prompt_tokens = model.tokenizer.encode(p.text, /*parse_special=*/true);
    }
    if (request.prompt_tokens.empty()) return ApiError::bad_request("the prompt is empty", "prompt");
    if (cr.echo) {
        if (p.is_tokens) {
            auto text = model.tokenizer.decode(p.tokens, cr.text.skip_special_tokens);
            if (text.ok()) echo = std::move(text).value();
        } else {
            echo = p.text;
        }
    }
    request.params = cr.params;
    request.priority = cr.priority;
    request.cache_salt = cr.cache_salt;
    return std::nullopt;
}

}  // namespace

void handle_completions(ServiceContext& ctx, Exchange x) {
    auto body = parse_json_body(x);
    if (!body) return;
    CompletionRequest cr;
    if (auto err = parse_completion_request(*body, cr)) return send_error(x, *err);
    const auto target = resolve_model(*x.model, cr.model);  // the base model or a LoRA adapter
    if (!target) return send_error(x, unknown_model(cr.model));
    if (auto err = check_tenant_model(ctx, x, cr.model)) return send_error(x, *err);
    if (auto err = apply_structured_output(*x.model, cr.structured, cr.params)) return send_error(x, *err);
    if (ctx.config.sampling_defaults) engine::apply_generation_config(cr.params, *ctx.config.sampling_defaults);
    // echo + logprobs: the prompt's tokens get logprobs too (vLLM asks the engine for prompt logprobs).
    const bool echo_logprobs = cr.echo && cr.params.logprobs;
    if (echo_logprobs && !cr.params.prompt_logprobs) cr.params.prompt_logprobs = cr.params.top_logprobs;
    auto job = CompletionJob::create(ctx, false, cr.text, cr.params, cr.model, x);
    job->echo_logprobs = echo_logprobs;
    job->prompt_logprobs = body->find("prompt_logprobs") && !body->find("prompt_logprobs")->is_null();

    std::vector<engine::Request> requests(cr.prompts.size());
    std::vector<std::string> echoes(cr.prompts.size());
    for (size_t i = 0; i < cr.prompts.size(); ++i) {
        if (auto err = prepare_prompt(*x.model, cr, cr.prompts[i], requests[i], echoes[i])) return send_error(x, *err);
        requests[i].lora_id = target->id;
        requests[i].lora_hold = target->hold;
        job->prompt_ids.push_back(requests[i].prompt_tokens);
    }
    job->choices.resize(requests.size() * static_cast<size_t>(job->n));
    for (size_t i = 0; i < job->choices.size(); ++i) {
        auto& ch = job->choices[i];
        ch.decoder.emplace(x.model->tokenizer, cr.text.skip_special_tokens);
        ch.stop.emplace(cr.text.stop, cr.text.include_stop_str_in_output);
        ch.prefix = echoes[i / static_cast<size_t>(job->n)];
    }
    int64_t prompt_tokens = 0;
    for (const auto& request : requests)
        prompt_tokens += static_cast<int64_t>(request.prompt_tokens.size());
    if (auto err = admit_prompt_tokens(x, prompt_tokens)) return send_error(x, *err);
    for (auto& request : requests) {
        auto submitted = x.model->generator.submit(std::move(request));
        if (!submitted.ok()) {
            for (auto& s : job->streams)
                x.model->generator.cancel(s->id());
            return send_error(x, ApiError::bad_request(submitted.message(), "prompt"));
        }
        job->streams.push_back(std::move(submitted).value());
    }
    job->start();
}

}  // namespace pagoda::server::openai
