// vLLM's POST /v1/score (text_1 against text_2, one to one or one to many) and POST /v1/rerank (Jina's and Cohere's
// body: query, documents, top_n, return_documents) for a reranker that scores with its LM head, as Qwen3-Reranker
// does: a pair's tokens are text_1's then text_2's (each tokenized alone, as a Hugging Face tokenizer encodes a
// pair with no template), the engine returns the logits of the "no" and "yes" tokens at the last position, and the
// score is softmax([no, yes])[yes] = 1 / (1 + exp(no - yes)) (vLLM's classifier_from_token ["no", "yes"]). The
// Qwen3-Reranker prompt template (system prefix, <Instruct>/<Query>/<Document>, assistant suffix) is the client's to
// apply, as in vLLM's example: docs/serving.md gives it.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "server/openai/json_fields.h"
#include "server/openai/pooling_job.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

constexpr size_t kMaxPairs = 2048;

// A string or a list of strings (Jina's and Cohere's documents may also be {"text": ...} objects).
void parse_texts(Fields& f, const char* name, std::vector<std::string>& out) {
    const Json* v = f.get(name);
    if (!v) return f.fail(std::string("'") + name + "' is required", name);
    if (v->is_string()) return out.push_back(v->as_string());
    if (!v->is_array() || v->as_array().empty())
        return f.fail(std::string("'") + name + "' must be a string or a non-empty list of strings", name);
    for (size_t i = 0; i < v->as_array().size(); ++i) {
        const Json& item = v->as_array()[i];
        const Json* text = item.is_object() ? item.find("text") : nullptr;
        if (item.is_string())
            out.push_back(item.as_string());
        else if (text && text->is_string())
            out.push_back(text->as_string());
        else
            return f.fail(std::string("'") + name + "[" + std::to_string(i) + "]' must be a string", name);
    }
}

struct Pair {
    size_t first = 0, second = 0;  // indices into the two text lists
};

// Scores `pairs` of texts (a: the queries, b: the documents) and answers with `answer(scores, prompt tokens)`.
void score_pairs(ServiceContext& ctx, Exchange x, const std::vector<std::string>& a, const std::vector<std::string>& b,
                 const std::vector<Pair>& pairs, std::optional<int64_t> truncate,
                 std::function<void(const Exchange&, const std::vector<double>&, int64_t)> answer) {
    if (pairs.size() > kMaxPairs)
        return send_error(x, ApiError::bad_request("at most " + std::to_string(kMaxPairs) + " pairs per request"));
    std::vector<engine::Request> requests(pairs.size());
    std::vector<int32_t> second;
    for (size_t i = 0; i < pairs.size(); ++i) {
        const std::string where = "pair " + std::to_string(i);
        engine::Request& r = requests[i];
        // Tokenized apart: the tokens of text_1 + text_2 are not those of the joined text where they meet.
        if (auto err = pooling_prompt_tokens(*x.model, Prompt{a[pairs[i].first], {}, false}, false, std::nullopt, where,
                                             r.prompt_tokens))
            return send_error(x, *err);
        if (auto err = pooling_prompt_tokens(*x.model, Prompt{b[pairs[i].second], {}, false}, false, std::nullopt,
                                             where, second))
            return send_error(x, *err);
        r.prompt_tokens.insert(r.prompt_tokens.end(), second.begin(), second.end());
        if (truncate) {
            const int64_t keep = *truncate < 0 ? x.model->max_model_len.load() : *truncate;
            if (static_cast<int64_t>(r.prompt_tokens.size()) > keep)
                r.prompt_tokens.erase(r.prompt_tokens.begin(), r.prompt_tokens.end() - keep);
        }
        if (const int32_t max_len = x.model->max_model_len.load();
            max_len > 0 && static_cast<int64_t>(r.prompt_tokens.size()) > max_len)
            return send_error(
                x, ApiError::bad_request(where + " has " + std::to_string(r.prompt_tokens.size()) +
                                         " tokens; this model's maximum context length is " + std::to_string(max_len)));
        r.pooling = engine::PoolingTask::kTokenLogits;
        r.pooling_token_ids = x.model->pooling.score_token_ids;
    }
    PoolingJob::start(std::move(x), std::move(requests),
                      [answer = std::move(answer)](const Exchange& x, PooledOutputs& outputs) {
                          std::vector<double> scores;
                          for (const std::vector<float>& v : outputs.vectors)  // [no, yes] logits
                              scores.push_back(1.0 / (1.0 + std::exp(static_cast<double>(v.at(0)) - v.at(1))));
                          answer(x, scores, outputs.prompt_tokens);
                      });
}

// The body of a request to a scoring endpoint, or nullopt after answering (a model served for another task, bad JSON).
std::optional<Json> score_body(ServiceContext& ctx, const Exchange& x) {
    if (auto err = check_task(ctx, ModelTask::kScore, x.request.path)) {
        send_error(x, *err);
        return std::nullopt;
    }
    return parse_json_body(x);
}

// Both endpoints' common fields: the model (checked; empty: the default) and vLLM's truncate_prompt_tokens.
struct CommonFields {
    std::string model;
    std::optional<int64_t> truncate;
};

std::optional<ApiError> check_common(ServiceContext& ctx, const Exchange& x, Fields& f, CommonFields& c) {
    if (auto v = f.string("model")) c.model = *v;
    c.truncate = f.integer("truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max());
    if (c.truncate == 0) f.fail("'truncate_prompt_tokens' must be -1 or positive", "truncate_prompt_tokens");
    if (f.error) return f.error;
    if (!serves_model(*x.model, c.model)) return unknown_model(c.model);
    if (auto err = check_tenant_model(ctx, x, c.model)) return err;
    if (c.model.empty()) c.model = x.model->served_model_names.front();
    return std::nullopt;
}

Json usage_json(int64_t prompt_tokens) {
    return json_object({{"prompt_tokens", Json(prompt_tokens)},
                        {"total_tokens", Json(prompt_tokens)},
                        {"completion_tokens", Json(int64_t{0})}});
}

}  // namespace

void handle_score(ServiceContext& ctx, Exchange x) {
    auto body = score_body(ctx, x);
    if (!body) return;
    Fields f(*body);
    CommonFields common;
    std::vector<std::string> a, b;
    parse_texts(f, "text_1", a);
    parse_texts(f, "text_2", b);
    if (auto err = check_common(ctx, x, f, common)) return send_error(x, *err);
    // One to one, or one text_1 against every text_2 (vLLM's rule).
    if (a.size() != 1 && a.size() != b.size())
        return send_error(x, ApiError::bad_request("'text_1' must hold one text or as many as 'text_2' (" +
                                                       std::to_string(b.size()) + "), got " + std::to_string(a.size()),
                                                   "text_1"));
    std::vector<Pair> pairs;
    for (size_t i = 0; i < b.size(); ++i)
        pairs.push_back({a.size() == 1 ? 0 : i, i});
    const int64_t created = unix_seconds();
    score_pairs(
        ctx, std::move(x), a, b, pairs, common.truncate,
        [model = common.model, created](const Exchange& x, const std::vector<double>& scores, int64_t tokens) {
            Json data = Json::array();
            for (size_t i = 0; i < scores.size(); ++i)
                data.push_back(json_object(
                    {{"index", Json(static_cast<int64_t>(i))}, {"object", Json("score")}, {"score", Json(scores[i])}}));
            send_json(x, 200,
                      json_object({{"id", Json(random_id("score-"))},
                                   {"object", Json("list")},
                                   {"created", Json(created)},
                                   {"model", Json(model)},
                                   {"data", std::move(data)},
                                   {"usage", usage_json(tokens)}})
                          .dump());
        });
}

void handle_rerank(ServiceContext& ctx, Exchange x) {
    auto body = score_body(ctx, x);
    if (!body) return;
    Fields f(*body);
    CommonFields common;
    std::vector<std::string> query, documents;
    if (const Json* q = f.get("query"); q && !q->is_string()) f.wrong_type("query", "a string", *q);
    parse_texts(f, "query", query);
    parse_texts(f, "documents", documents);
    const int64_t top_n = f.integer("top_n", 0, std::numeric_limits<int32_t>::max()).value_or(0);
    const bool return_documents = f.boolean("return_documents").value_or(true);
    if (auto err = check_common(ctx, x, f, common)) return send_error(x, *err);
    std::vector<Pair> pairs;
    for (size_t i = 0; i < documents.size(); ++i)
        pairs.push_back({0, i});
    score_pairs(
        ctx, std::move(x), query, documents, pairs, common.truncate,
        [model = common.model, documents, top_n, return_documents](const Exchange& x, const std::vector<double>& scores,
                                                                   int64_t tokens) {
            // Best first; top_n (0: all) of them.
            std::vector<size_t> order(scores.size());
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(),
                             [&scores](size_t i, size_t j) { return scores[i] > scores[j]; });
            if (top_n > 0 && static_cast<size_t>(top_n) < order.size()) order.resize(static_cast<size_t>(top_n));
            Json results = Json::array();
            for (size_t i : order) {
                Json r = json_object({{"index", Json(static_cast<int64_t>(i))}, {"relevance_score", Json(scores[i])}});
                if (return_documents) r.set("document", json_object({{"text", Json(documents[i])}}));
                results.push_back(std::move(r));
            }
            send_json(x, 200,
                      json_object({{"id", Json(random_id("rerank-"))},
                                   {"model", Json(model)},
                                   {"usage", json_object({{"total_tokens", Json(tokens)}})},
                                   {"results", std::move(results)}})
                          .dump());
        });
}

}  // namespace pagoda::server::openai
