// CompletionJob's JSON: logprobs in the chat and legacy completions shapes, vLLM's prompt_logprobs, and the
// non-streamed response body.
#include <algorithm>

#include "common/utf8.h"
#include "server/openai/completion_job.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

// The legacy completions logprobs' text_offset: where each token's text starts in the choice's text, counted as vLLM
// counts it (Python characters, i.e. code points, of each listed token after the first, from `start`).
Json text_offsets(const Json& tokens, int64_t start) {
    Json out = Json::array();
    for (const Json& t : tokens.as_array()) {
        out.push_back(Json(start));
        start += static_cast<int64_t>(utf8_length(t.as_string()));
    }
    return out;
}

}  // namespace

// Completions echo with logprobs: the prompt's entries of the legacy lists (the first token has none).
void CompletionJob::append_prompt_logprobs(size_t s, Json& tokens, Json& token_lps, Json& tops) const {
    const std::vector<int32_t>& ids = prompt_ids[s];
    for (size_t i = 0; i < ids.size(); ++i) {
        tokens.push_back(Json(lossy_utf8(tokenizer->token_bytes(ids[i]))));
        if (i == 0 || i > prompt_lps[s].size()) {
            token_lps.push_back(Json());
            tops.push_back(Json());
            continue;
        }
        const engine::TokenLogprobs& lp = prompt_lps[s][i - 1];
        token_lps.push_back(Json(static_cast<double>(lp.logprob)));
        Json top = Json::object();
        for (int32_t k = 0; k < lp.num_top; ++k)
            top.set(lossy_utf8(tokenizer->token_bytes(lp.top[k].token)), Json(static_cast<double>(lp.top[k].logprob)));
        // As vLLM: the prompt's own token is listed with the most likely ones.
        top.set(lossy_utf8(tokenizer->token_bytes(ids[i])), Json(static_cast<double>(lp.logprob)));
        tops.push_back(std::move(top));
    }
}

// vLLM's prompt_logprobs: [null, {"<id>": {logprob, rank, decoded_token}, ...}, ...], the prompt's token first.
Json CompletionJob::prompt_logprobs_json(size_t s) const {
    Json out = Json::array();
    const std::vector<int32_t>& ids = prompt_ids[s];
    auto entry = [&](int32_t token, float logprob, int32_t rank) {
        Json e = Json::object();
        e.set("logprob", Json(static_cast<double>(logprob)));
        e.set("rank", rank > 0 ? Json(rank) : Json());
        e.set("decoded_token", Json(lossy_utf8(tokenizer->token_bytes(token))));
        return e;
    };
    for (size_t i = 0; i < ids.size() && i <= prompt_lps[s].size(); ++i) {
        if (i == 0) {
            out.push_back(Json());
            continue;
        }
        const engine::TokenLogprobs& lp = prompt_lps[s][i - 1];
        Json pos = Json::object();
        pos.set(std::to_string(ids[i]), entry(ids[i], lp.logprob, lp.rank));
        for (int32_t k = 0; k < lp.num_top; ++k)
            if (lp.top[k].token != ids[i])
                pos.set(std::to_string(lp.top[k].token), entry(lp.top[k].token, lp.top[k].logprob, k + 1));
        out.push_back(std::move(pos));
    }
    return out;
}

// One chat logprobs entry: {token, logprob, bytes} (OpenAI's TopLogprob; a content entry adds top_logprobs).
Json CompletionJob::chat_logprob(int32_t token, float logprob) const {
    const std::string_view raw = tokenizer->token_bytes(token);
    Json entry = Json::object();
    entry.set("token", Json(lossy_utf8(raw)));
    entry.set("logprob", Json(static_cast<double>(logprob)));
    Json bytes = Json::array();
    for (unsigned char b : raw)
        bytes.push_back(Json(static_cast<int>(b)));
    entry.set("bytes", std::move(bytes));
    return entry;
}

// Chat: {"content":[{token, logprob, bytes, top_logprobs}]}; completions: the legacy parallel lists, led by the
// prompt's entries when `prompt_of` names a stream (echo).
std::string CompletionJob::logprobs_for(const engine::ChoiceDelta& d, Choice& ch, const size_t* prompt_of) {
    Json content = Json::array();
    Json tokens = Json::array(), token_lps = Json::array(), tops = Json::array();
    if (prompt_of && stream) append_prompt_logprobs(*prompt_of, tokens, token_lps, tops);
    for (size_t i = 0; i < d.logprobs.size() && i < d.token_ids.size(); ++i) {
        const auto& lp = d.logprobs[i];
        const std::string tok = lossy_utf8(tokenizer->token_bytes(d.token_ids[i]));
        if (chat) {
            Json entry = chat_logprob(d.token_ids[i], lp.logprob);
            Json top = Json::array();
            for (int32_t k = 0; k < std::min(lp.num_top, top_logprobs); ++k)
                top.push_back(chat_logprob(lp.top[k].token, lp.top[k].logprob));
            entry.set("top_logprobs", std::move(top));
            if (!stream) ch.logprobs_content.push_back(entry);
            content.push_back(std::move(entry));
        } else {
            Json top = Json::object();
            for (int32_t k = 0; k < std::min(lp.num_top, top_logprobs); ++k)
                top.set(lossy_utf8(tokenizer->token_bytes(lp.top[k].token)),
                        Json(static_cast<double>(lp.top[k].logprob)));
            // As OpenAI and vLLM: the sampled token is always listed (up to logprobs + 1 entries).
            top.set(tok, Json(static_cast<double>(lp.logprob)));
            tokens.push_back(Json(tok));
            token_lps.push_back(Json(static_cast<double>(lp.logprob)));
            tops.push_back(top);
            if (!stream) {
                ch.lp_tokens.push_back(Json(tok));
                ch.lp_token_logprobs.push_back(Json(static_cast<double>(lp.logprob)));
                ch.lp_top.push_back(std::move(top));
            }
        }
    }
    if (!stream) return {};
    Json out = Json::object();
    if (chat) {
        out.set("content", std::move(content));
    } else {
        out.set("text_offset", text_offsets(tokens, ch.text_chars));
        out.set("tokens", std::move(tokens));
        out.set("token_logprobs", std::move(token_lps));
        out.set("top_logprobs", std::move(tops));
    }
    return out.dump();
}

std::string CompletionJob::response_body(std::vector<chat::ParsedChatOutput>& parsed, const UsageCounts& u) {
    std::string body;
    body.reserve(512);
    body += "{\"id\":";
    json_escape_to(body, id);
    body += chat ? ",\"object\":\"chat.completion\"" : ",\"object\":\"text_completion\"";
    body += ",\"created\":" + std::to_string(created) + ",\"model\":";
    json_escape_to(body, model);
    body += ",\"choices\":[";
    for (size_t i = 0; i < choices.size(); ++i) {
        Choice& ch = choices[i];
        if (i) body += ',';
        body += "{\"index\":" + std::to_string(i);
        if (chat) {
            chat::ParsedChatOutput& out = parsed[i];
            const std::string content = ch.prefix + out.content;
            if (ch.finish == "stop" && !out.tool_calls.empty()) ch.finish = "tool_calls";
            Json message = Json::object();
            message.set("role", Json("assistant"));
            message.set("content", content.empty() && !out.tool_calls.empty() ? Json() : Json(content));
            if (!out.reasoning.empty()) {
                message.set("reasoning_content", Json(out.reasoning));
                message.set("reasoning", Json(out.reasoning));
            }
            Json calls = Json::array();
            for (const auto& call : out.tool_calls) {
                Json fn = Json::object();
                fn.set("name", Json(call.name));
                fn.set("arguments", Json(call.arguments));
                Json tc = Json::object();
                tc.set("id", Json(call.id));
                tc.set("type", Json("function"));
                tc.set("function", std::move(fn));
                calls.push_back(std::move(tc));
            }
            message.set("tool_calls", std::move(calls));
            body += ",\"message\":" + message.dump();
            body += ",\"logprobs\":";
            if (logprobs) {
                Json lp = Json::object();
                lp.set("content", std::move(ch.logprobs_content));
                body += lp.dump();
            } else {
                body += "null";
            }
        } else {
            const size_t s = i / static_cast<size_t>(n);
            body += ",\"text\":";
            json_escape_to(body, ch.prefix + ch.text);
            body += ",\"logprobs\":";
            if (logprobs) {
                Json tokens = Json::array(), token_lps = Json::array(), tops = Json::array();
                if (echo_logprobs) append_prompt_logprobs(s, tokens, token_lps, tops);
                for (Json& v : ch.lp_tokens.as_array())
                    tokens.push_back(std::move(v));
                for (Json& v : ch.lp_token_logprobs.as_array())
                    token_lps.push_back(std::move(v));
                for (Json& v : ch.lp_top.as_array())
                    tops.push_back(std::move(v));
                Json lp = Json::object();
                lp.set("text_offset", text_offsets(tokens, 0));
                lp.set("tokens", std::move(tokens));
                lp.set("token_logprobs", std::move(token_lps));
                lp.set("top_logprobs", std::move(tops));
                body += lp.dump();
            } else {
                body += "null";
            }
            if (prompt_logprobs) body += ",\"prompt_logprobs\":" + prompt_logprobs_json(s).dump();
        }
        body += ",\"finish_reason\":";
        json_escape_to(body, ch.finish.empty() ? "stop" : ch.finish);
        body += '}';
    }
    body += ']';
    if (chat && prompt_logprobs) body += ",\"prompt_logprobs\":" + prompt_logprobs_json(0).dump();
    body += ",\"usage\":";
    append_usage_json(body, u);
    body += '}';
    return body;
}

}  // namespace pagoda::server::openai
