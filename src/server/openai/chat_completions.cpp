// POST /v1/chat/completions: validate, pick the tools and the output parsers tool_choice asks for, render the chat
// template, tokenize, submit; a CompletionJob answers from then on. The Responses API (responses.cpp) comes here too,
// with its request turned into a chat request and its own OutputSink.
#include "chat/output/reasoning_parser.h"
#include "server/openai/completion_job.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

// Template kwargs: the server's defaults, overridden by the request's.
Json template_kwargs(const ServiceConfig& config, const ChatRequest& cr) {
    Json kwargs =
        config.default_chat_template_kwargs.is_object() ? config.default_chat_template_kwargs : Json::object();
    if (cr.chat_template_kwargs.is_object())
        for (const auto& [k, v] : cr.chat_template_kwargs.as_object())
            kwargs.set(k, v);
    if (cr.continue_final_message) kwargs.set("continue_final_message", Json(true));
    return kwargs;
}

// tool_choice: "none" renders no tools and parses none; "auto" uses the server's parser; "required" and a named
// function render the tools (a named choice: that one only) and parse with the server's parser, or the one the
// template's call format implies (vLLM needs no --tool-call-parser for them either).
std::optional<chat::ToolParserKind> choose_tools(const ServiceConfig& config, const ChatRequest& cr,
                                                 const chat::ChatTemplate& tmpl, CompletionJob& job) {
    std::optional<chat::ToolParserKind> tool_parser;
    if (cr.tools.is_array() && cr.tool_choice != "none") {
        job.tools = cr.tools;
        if (cr.tool_choice == "auto") {
            tool_parser = config.tool_parser;
        } else {
            job.tool_policy.forced = true;
            tool_parser = config.tool_parser ? *config.tool_parser : chat::detect_tool_parser(tmpl.source(true));
            if (cr.tool_choice == "function") {
                job.tool_policy.function_name = cr.tool_choice_name;
                Json only = Json::array();
                for (const Json& t : cr.tools.as_array())
                    if (t.find("function")->find("name")->as_string() == cr.tool_choice_name) only.push_back(t);
                job.tools = std::move(only);
            }
        }
    }
    job.tool_policy.parallel = cr.parallel_tool_calls;
    return tool_parser;
}

// Will the model think first? With a reasoning parser, unless chat_template_kwargs.enable_thinking is false or the
// rendered prompt already closed the thinking block.
bool thinks_first(const ServiceConfig& config, const Json& kwargs, const std::string& prompt) {
    const Json* thinking = kwargs.find("enable_thinking");
    return config.reasoning_parser && !(thinking && thinking->is_bool() && !thinking->as_bool()) &&
           !chat::prompt_closes_reasoning(prompt);
}

// The last message's content, when it is a string (echo and continue_final_message use it).
const std::string* last_content(const ChatRequest& cr) {
    const Json* content = cr.messages.as_array().back().find("content");
    return content && content->is_string() ? &content->as_string() : nullptr;
}

}  // namespace

void handle_chat_completions(ServiceContext& ctx, Exchange x) {
    auto body = parse_json_body(x);
    if (!body) return;
    ChatRequest cr;
    if (auto err = parse_chat_request(*body, cr)) return send_error(x, *err);
    start_chat(ctx, std::move(x), cr, nullptr);
}

void start_chat(ServiceContext& ctx, Exchange x, ChatRequest& cr, std::unique_ptr<OutputSink> sink) {
    const auto target = resolve_model(*x.model, cr.model);  // the base model or a LoRA adapter
    if (!target) return send_error(x, unknown_model(cr.model));
    if (auto err = check_tenant_model(ctx, x, cr.model)) return send_error(x, *err);
    if (auto err = apply_structured_output(*x.model, cr.structured, cr.params)) {
        // A Responses request's text.format is chat's response_format with the json_schema fields one level up.
        if (sink && err->param.rfind("response_format", 0) == 0) {
            std::string rest = err->param.substr(std::string_view("response_format").size());
            if (rest.rfind(".json_schema", 0) == 0) rest = rest.substr(std::string_view(".json_schema").size());
            err->param = "text.format" + rest;
        }
        return send_error(x, *err);
    }
    if (ctx.config.sampling_defaults) engine::apply_generation_config(cr.params, *ctx.config.sampling_defaults);
    if (cr.tools.is_array() && cr.tool_choice == "auto" &&
        (!ctx.config.enable_auto_tool_choice || !ctx.config.tool_parser)) {
        return send_error(x, ApiError::bad_request("\"auto\" tool choice requires --enable-auto-tool-choice and "
                                                   "--tool-call-parser to be set",
                                                   "tool_choice"));
    }
    const Json kwargs = template_kwargs(ctx.config, cr);

    std::unique_ptr<chat::ChatTemplate> request_template;
    const chat::ChatTemplate* tmpl = x.model->chat_template.get();
    if (cr.chat_template) {
        auto t = chat::ChatTemplate::from_string(*cr.chat_template, ctx.config.tokenizer_config);
        if (!t.ok()) return send_error(x, ApiError::bad_request("chat_template: " + t.message(), "chat_template"));
        request_template = std::make_unique<chat::ChatTemplate>(std::move(t).value());
        tmpl = request_template.get();
    }
    if (!tmpl) {
        return send_error(x, ApiError::bad_request("this model has no chat template; pass 'chat_template' or use "
                                                   "/v1/completions",
                                                   "messages"));
    }

    auto job = CompletionJob::create(ctx, true, cr.text, cr.params, cr.model, x);
    job->sink = std::move(sink);
    const std::optional<chat::ToolParserKind> tool_parser = choose_tools(ctx.config, cr, *tmpl, *job);

    auto prompt = tmpl->render(cr.messages, job->tools, cr.add_generation_prompt, kwargs);
    if (!prompt.ok()) {
        return send_error(x,
                          ApiError::bad_request("rendering the chat template failed: " + prompt.message(), "messages"));
    }
    std::string prompt_text = std::move(prompt).value();
    if (cr.continue_final_message) {
        // The template closes the last message; continuing it means cutting the prompt right after its content.
        if (const std::string* content = last_content(cr); content && !content->empty()) {
            const size_t at = prompt_text.rfind(*content);
            if (at != std::string::npos) prompt_text.resize(at + content->size());
        }
    }

    engine::Request request;
    request.prompt_tokens = x.model->tokenizer.encode(prompt_text, /*parse_special=*/true);
    request.params = cr.params;
    request.priority = cr.priority;
    request.cache_salt = cr.cache_salt;
    // A forced tool choice is generated under the grammar of the parser's call format, so the output holds a call.
    if (job->tool_policy.forced && tool_parser) {
        if (cr.structured)
            return send_error(x, ApiError::bad_request("a forced 'tool_choice' cannot be combined with structured "
                                                       "output (response_format, structured_outputs, guided_*)",
                                                       "tool_choice"));
        auto compiled = x.model->grammars.compile_tool_calls(job->tools, job->tool_policy.parallel,
                                                             *tool_parser == chat::ToolParserKind::kQwen3Coder);
        if (auto* err = std::get_if<ApiError>(&compiled)) return send_error(x, *err);
        request.params.grammar = std::get<0>(std::move(compiled));
    }
    // A thinking model's reasoning is free; its grammar starts after </think> (vLLM's reasoning-aware structured
    // output), so a schema or a forced call constrains the answer, not the thought.
    const bool thinking = thinks_first(ctx.config, kwargs, prompt_text);
    if (request.params.grammar && thinking)
        request.params.grammar_after_token = x.model->tokenizer.token_to_id("</think>");
    request.lora_id = target->id;
    request.lora_hold = target->hold;

    chat::OutputParserOptions& parser_options = job->parser_options;
    if (ctx.config.reasoning_parser && cr.include_reasoning) {
        chat::ReasoningOptions ro;
        ro.thinking_enabled = thinking;
        parser_options.reasoning = ro;
    }
    parser_options.tool_parser = tool_parser;
    parser_options.tool_options.tools = job->tools.is_null() ? nullptr : &job->tools;  // outlives the parsers
    const std::string* echo = cr.echo ? last_content(cr) : nullptr;
    job->choices.resize(static_cast<size_t>(job->n));
    for (auto& ch : job->choices) {
        ch.decoder.emplace(x.model->tokenizer, cr.text.skip_special_tokens);
        ch.stop.emplace(cr.text.stop, cr.text.include_stop_str_in_output);
        if (job->stream && (parser_options.reasoning || parser_options.tool_parser)) {
            ch.parser.emplace(parser_options);
            ch.tool_filter.emplace(&job->tool_policy);
        }
        if (echo) ch.prefix = *echo;
    }
    job->prompt_ids.push_back(request.prompt_tokens);
    if (auto err = admit_prompt_tokens(x, static_cast<int64_t>(request.prompt_tokens.size())))
        return send_error(x, *err);
    auto submitted = x.model->generator.submit(std::move(request));
    if (!submitted.ok()) return send_error(x, ApiError::bad_request(submitted.message()));
    job->streams.push_back(std::move(submitted).value());
    job->start();
}

}  // namespace pagoda::server::openai
